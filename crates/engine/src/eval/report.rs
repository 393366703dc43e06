//! What `eval` printed: the report of either kind of run.

use super::{multi, EvalReport};

/// What `eval` printed: a passage-level or a page-level report.
#[derive(Debug, Clone)]
pub enum Report {
    Passages(EvalReport),
    Pages(Box<multi::MultiReport>),
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Report::Passages(report) => write!(f, "{report}"),
            Report::Pages(report) => writeln!(f, "{report}"),
        }
    }
}
