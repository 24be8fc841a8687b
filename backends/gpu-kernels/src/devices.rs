//! The devices a GPU delegate runs on: the adapters its API lists, kept where their name
//! matches the user's `device_filter` and the delegate can use them, each opened on first
//! use and shared afterwards. The Vulkan and wgpu delegates differ in how they list, check
//! and open an adapter, not in this bookkeeping or in what a user is told when none is
//! left.

use std::sync::{Arc, OnceLock};

/// The usable adapters `A` and their devices `D`, opened on first use.
pub struct Devices<A, D> {
    adapters: Vec<A>,
    opened: Vec<OnceLock<Result<Arc<D>, String>>>,
}

/// Why no adapter was kept, in the words the delegates' errors print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoneUsable {
    /// ` matching device_filter '...'`, or empty without a filter.
    pub filter: String,
    /// Every adapter the API listed (kept or not), or `none`: a user who filtered or whose
    /// adapter was refused sees what there was to choose from.
    pub found: String,
}

impl<A, D> Devices<A, D> {
    /// Keeps the adapters of `all` whose `name` contains `filter` (case-insensitive; empty:
    /// all) and that `usable` turns into an `A`; `label` names each in the error when none
    /// is kept.
    pub fn select<T>(
        all: Vec<T>,
        filter: &str,
        name: impl Fn(&T) -> String,
        label: impl Fn(&T) -> String,
        usable: impl FnMut(T) -> Option<A>,
    ) -> Result<Self, NoneUsable> {
        let labels: Vec<String> = all.iter().map(label).collect();
        let wanted = filter.to_lowercase();
        let adapters: Vec<A> = all
            .into_iter()
            .filter(|a| name(a).to_lowercase().contains(&wanted))
            .filter_map(usable)
            .collect();
        if adapters.is_empty() {
            return Err(NoneUsable {
                filter: if filter.is_empty() {
                    String::new()
                } else {
                    format!(" matching device_filter '{filter}'")
                },
                found: if labels.is_empty() {
                    "none".into()
                } else {
                    labels.join(", ")
                },
            });
        }
        let opened = adapters.iter().map(|_| OnceLock::new()).collect();
        Ok(Devices { adapters, opened })
    }

    /// The usable adapters, in the API's order (the delegate's device indices).
    pub fn adapters(&self) -> &[A] {
        &self.adapters
    }

    /// The adapter at `index`.
    pub fn get(&self, index: u32) -> Option<&A> {
        self.adapters.get(index as usize)
    }

    /// The device at `index` (`None`: no such adapter), opened by `open` on first use and
    /// shared afterwards; a failed opening is remembered (its message), not retried.
    pub fn open(
        &self,
        index: u32,
        open: impl FnOnce(&A) -> Result<D, String>,
    ) -> Option<Result<Arc<D>, String>> {
        let adapter = self.adapters.get(index as usize)?;
        Some(
            self.opened[index as usize]
                .get_or_init(|| open(adapter).map(Arc::new))
                .clone(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(all: &[&str], filter: &str) -> Result<Devices<String, usize>, NoneUsable> {
        let all: Vec<String> = all.iter().map(|s| s.to_string()).collect();
        Devices::select(
            all,
            filter,
            |s| s.clone(),
            |s| format!("{s} (api)"),
            |s| (!s.contains("broken")).then_some(s),
        )
    }

    #[test]
    fn the_filter_and_the_usability_check_both_apply_and_none_left_says_what_there_was() {
        let d = pick(&["llvmpipe", "NVIDIA H200", "broken NVIDIA"], "nvidia").unwrap();
        assert_eq!(d.adapters(), ["NVIDIA H200"]);
        assert_eq!(d.get(1), None);
        let e = pick(&["llvmpipe", "broken NVIDIA"], "nvidia")
            .err()
            .unwrap();
        assert_eq!(e.filter, " matching device_filter 'nvidia'");
        assert_eq!(e.found, "llvmpipe (api), broken NVIDIA (api)");
        let e = pick(&[], "").err().unwrap();
        assert_eq!((e.filter.as_str(), e.found.as_str()), ("", "none"));
    }

    #[test]
    fn a_device_is_opened_once_and_a_failure_is_remembered() {
        let d = pick(&["a", "b"], "").unwrap();
        let mut calls = 0;
        let first = d.open(0, |_| {
            calls += 1;
            Ok(7)
        });
        let again = d.open(0, |_| {
            calls += 1;
            Ok(8)
        });
        assert_eq!((*first.unwrap().unwrap(), *again.unwrap().unwrap()), (7, 7));
        assert_eq!(calls, 1);
        assert_eq!(d.open(1, |_| Err("lost".into())), Some(Err("lost".into())));
        assert_eq!(d.open(1, |_| Ok(1)), Some(Err("lost".into())));
        assert!(d.open(2, |_| Ok(1)).is_none());
    }
}
