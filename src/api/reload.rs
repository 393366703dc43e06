//! One config reload at a time: `POST /internal/retrieval/config/reload` and `SIGHUP` take the
//! slot, and a reload that finds it taken is answered 409 `reload_in_progress` at once instead of
//! queueing behind one that may be stuck on a file. The slot is held by the thread that reads the
//! files and is freed when that thread ends, so there is never more than one such thread, even
//! when a read outlives the reload's timeout.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The reload in progress, if any (`AppState::reloads`).
#[derive(Debug, Default)]
pub(crate) struct ReloadSlot {
    running: Arc<Mutex<Option<Running>>>,
}

#[derive(Debug, Clone, Copy)]
struct Running {
    since: Instant,
    /// The setting whose file is being read.
    reading: &'static str,
}

/// What a reload finding the slot taken is told.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Busy {
    pub(crate) seconds: f64,
    pub(crate) reading: &'static str,
}

impl ReloadSlot {
    /// The slot, or what holds it.
    pub(crate) fn take(&self) -> Result<ReloadTicket, Busy> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = *running {
            return Err(Busy { seconds: held.since.elapsed().as_secs_f64(), reading: held.reading });
        }
        *running = Some(Running { since: Instant::now(), reading: "" });
        Ok(ReloadTicket { running: Arc::clone(&self.running) })
    }

    /// The setting whose file the reload in progress is reading.
    pub(crate) fn reading(&self) -> Option<&'static str> {
        self.running.lock().unwrap_or_else(|p| p.into_inner()).map(|held| held.reading)
    }
}

/// The slot, held: dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct ReloadTicket {
    running: Arc<Mutex<Option<Running>>>,
}

impl ReloadTicket {
    /// Notes which setting's file is being read.
    pub(crate) fn reading(&self, setting: &'static str) {
        if let Some(held) = self.running.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            held.reading = setting;
        }
    }
}

impl Drop for ReloadTicket {
    fn drop(&mut self) {
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reload_at_a_time_and_the_slot_is_freed_with_its_ticket() {
        let slot = ReloadSlot::default();
        let ticket = slot.take().unwrap();
        ticket.reading("RETR_BOOSTING_PATH");
        let busy = slot.take().unwrap_err();
        assert_eq!(busy.reading, "RETR_BOOSTING_PATH");
        assert_eq!(slot.reading(), Some("RETR_BOOSTING_PATH"));
        drop(ticket);
        assert_eq!(slot.reading(), None);
        assert!(slot.take().is_ok());
    }
}
