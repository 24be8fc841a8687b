//! Where a loaded plugin's code runs, asked of any [`PluginLibrary`] on any platform (the
//! plugin process exists only on Linux: see [`super::isolated`]).

use super::PluginLibrary;
use crate::config::Isolation;

impl PluginLibrary {
    /// Where the plugin's code runs.
    pub fn isolation(&self) -> Isolation {
        #[cfg(target_os = "linux")]
        if self.process.is_some() {
            return Isolation::Process;
        }
        Isolation::InProcess
    }

    /// Why the plugin process was given up (killed by the watchdog, died, or broke the
    /// protocol), once it has been; always `None` in the host's process.
    pub fn process_failure(&self) -> Option<String> {
        #[cfg(target_os = "linux")]
        if let Some(p) = &self.process {
            return p.failure();
        }
        None
    }
}
