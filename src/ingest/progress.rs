//! The embedding phase's progress on stderr: an indicatif bar with rate and ETA on a terminal,
//! else a line with rate and ETA about every 10 % (or every 30 s), so CI logs show a run is alive
//! without flooding. The engine reports `(done, total)` (`retrieval_engine::ingest::EmbedProgress`);
//! drawing it is the command's business.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Draws the embedding progress on stderr (nothing when quiet or when there is nothing to embed).
pub(crate) enum ProgressReporter {
    Silent,
    /// Not started: the engine has not said yet how many texts it sends.
    Pending,
    Bar(indicatif::ProgressBar),
    Lines {
        total: usize,
        started: Instant,
        last_line: Instant,
        last_decile: usize,
    },
}

impl ProgressReporter {
    pub(crate) fn new(quiet: bool) -> Self {
        if quiet {
            ProgressReporter::Silent
        } else {
            ProgressReporter::Pending
        }
    }

    /// `done` of `total` texts embedded.
    pub(crate) fn update(&mut self, done: usize, total: usize) {
        if let ProgressReporter::Pending = self {
            *self = Self::start(total);
        }
        match self {
            ProgressReporter::Silent | ProgressReporter::Pending => {}
            ProgressReporter::Bar(bar) => {
                bar.set_position(done as u64);
                if done >= total {
                    bar.finish();
                }
            }
            ProgressReporter::Lines { total, started, last_line, last_decile } => {
                let decile = done * 10 / (*total).max(1);
                let due = last_line.elapsed() >= Duration::from_secs(30);
                if done > 0 && (decile > *last_decile || due || done >= *total) {
                    *last_decile = decile;
                    *last_line = Instant::now();
                    let elapsed = started.elapsed().as_secs_f64();
                    let rate = if elapsed > 0.0 { done as f64 / elapsed } else { 0.0 };
                    let eta = if rate > 0.0 { (*total - done.min(*total)) as f64 / rate } else { 0.0 };
                    let _ = writeln!(
                        std::io::stderr().lock(),
                        "embedding: {done}/{total} texts ({}%), {rate:.1} texts/s, ETA {eta:.0}s",
                        done * 100 / (*total).max(1)
                    );
                }
            }
        }
    }

    fn start(total: usize) -> Self {
        if total == 0 {
            return ProgressReporter::Silent;
        }
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(total as u64);
            let style = indicatif::ProgressStyle::with_template(
                "embedding [{bar:30}] {pos}/{len} texts  {per_sec}  ETA {eta}  {elapsed}",
            )
            .map(|style| style.progress_chars("#>."))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            bar.set_style(style);
            ProgressReporter::Bar(bar)
        } else {
            let now = Instant::now();
            ProgressReporter::Lines { total, started: now, last_line: now, last_decile: 0 }
        }
    }
}
