//! [`Runner`]: one `rara scheduler` or `rara executor` child process.

use std::io::Read;
use std::process::Child;
use std::time::{Duration, Instant};

use rara_runtime::metrics::Counters;
use rara_testkit::history;

use super::signal;

/// A `rara scheduler` or `rara executor` child. Dropping it kills it (SIGKILL works on a
/// stopped process too), so no test leaves a runner behind.
pub struct Runner {
    pub name: String,
    pub child: Option<Child>,
}

impl Runner {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn signal(&self, sig: &str) {
        signal(self.pid(), sig);
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM: the runner finishes what it holds, prints its counters and exits. `None`
    /// when it exited without counters (crashed earlier, or did not stop within 30 s).
    pub fn stop(&mut self) -> Option<Counters> {
        let mut child = self.child.take()?;
        if matches!(child.try_wait(), Ok(None)) {
            signal(child.id(), "TERM");
        }
        let end = Instant::now() + Duration::from_secs(30);
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() > end {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("{} did not stop within 30 s", self.name);
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut out = String::new();
        child.stdout.take().expect("piped").read_to_string(&mut out).expect("read stdout");
        let counters = history::parse_counters(&out);
        if counters.is_none() {
            eprintln!("{} exited ({:?}) without counters", self.name, child.try_wait());
        }
        counters
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill();
    }
}
