//! The child side of the isolated runner (`baton-conformance __child`): it loads the
//! plugin, runs the cases named on stdin in order, and streams results (see
//! [`super::protocol`]). A crash or hang here costs the parent one case.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use baton_runtime_host::plugin::{PluginContext, PluginLibrary};

use super::abi;
use super::exec::{blank, run_graph_case, Harness, Reference};
use super::protocol::{Message, PluginInfo};
use crate::cases::{self, Case, CaseBody};
use crate::outcome::{CaseResult, Class};
use crate::tolerance::Tolerances;

/// Arguments of the child.
#[derive(Clone, Debug)]
pub struct ChildArgs {
    pub plugin: PathBuf,
    pub options: Vec<(String, String)>,
    pub tolerances: Option<PathBuf>,
}

/// Runs the child; returns its exit code (0, or 3 when it cannot start).
pub fn child_main(args: &ChildArgs) -> i32 {
    let ids: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    let tolerances = match Tolerances::load(args.tolerances.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("baton-conformance child: {e}");
            return 3;
        }
    };
    let catalogue = match cases::catalogue(true) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("baton-conformance child: {e}");
            return 3;
        }
    };
    let by_id: HashMap<&str, &Case> = catalogue.iter().map(|c| (c.id.as_str(), c)).collect();
    let mut state = PluginState::new(args.plugin.clone(), args.options.clone());
    let mut announced = PluginInfo::default();
    for id in &ids {
        emit(&Message::Start { id: id.clone() });
        let result = match by_id.get(id.as_str()) {
            Some(case) => run_case(&mut state, case, &tolerances),
            None => CaseResult::new(
                id,
                "?",
                "op",
                None,
                Class::ReferenceFail,
                "no such case in this kit's catalogue",
            ),
        };
        let info = state.info();
        if info != announced {
            emit(&Message::Plugin { info: info.clone() });
            announced = info;
        }
        emit(&Message::Done {
            result: Box::new(result),
        });
    }
    0
}

/// Runs one case of any kind against the plugin state.
pub fn run_case(state: &mut PluginState, case: &Case, tolerances: &Tolerances) -> CaseResult {
    if let CaseBody::Abi { check, samples } = &case.body {
        return abi::run_check(state, *check, case, samples);
    }
    match state.context() {
        Ok(ctx) => run_graph_case(
            &Harness {
                ctx,
                device: 0,
                tolerances,
                oracle: &Reference,
            },
            case,
        ),
        Err((class, message)) => {
            let mut r = blank(case);
            r.result = class;
            r.message = message;
            r
        }
    }
}

/// The plugin, loaded and its context created on first use; failures are remembered.
pub struct PluginState {
    pub path: PathBuf,
    pub options: Vec<(String, String)>,
    lib: Option<Result<Arc<PluginLibrary>, String>>,
    ctx: Option<Result<PluginContext, String>>,
    devices: Vec<String>,
}

impl PluginState {
    /// Nothing is loaded until a case needs it.
    pub fn new(path: PathBuf, options: Vec<(String, String)>) -> PluginState {
        PluginState {
            path,
            options,
            lib: None,
            ctx: None,
            devices: Vec::new(),
        }
    }

    /// The library, or `(load-fail, the host's typed error)`.
    pub fn library(&mut self) -> Result<&Arc<PluginLibrary>, (Class, String)> {
        let path = &self.path;
        self.lib
            .get_or_insert_with(|| PluginLibrary::load(path, None).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| (Class::LoadFail, e.clone()))
    }

    /// The context, or `(load-fail | create-fail, message)`.
    pub fn context(&mut self) -> Result<&PluginContext, (Class, String)> {
        if self.ctx.is_none() {
            let lib = self.library()?.clone();
            let ctx = lib.create(&self.options).map_err(|e| e.to_string());
            if let Ok(ctx) = &ctx {
                self.devices = ctx
                    .devices()
                    .map(|ds| {
                        ds.iter()
                            .map(|d| format!("{} (driver {})", d.name, d.driver_version))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            self.ctx = Some(ctx);
        }
        match self.ctx.as_ref() {
            Some(Ok(ctx)) => Ok(ctx),
            Some(Err(e)) => Err((Class::CreateFail, e.clone())),
            None => Err((Class::CreateFail, "no context".into())),
        }
    }

    /// What is known about the plugin.
    pub fn info(&self) -> PluginInfo {
        let mut info = PluginInfo::default();
        match &self.lib {
            Some(Ok(lib)) => {
                info.name = Some(lib.name.clone());
                info.version = Some(lib.version.clone());
                info.build_id = Some(lib.build_id.clone());
                info.abi = Some(format!(
                    "{}.{}",
                    baton_delegate_api::abi::ABI_MAJOR,
                    lib.abi_minor
                ));
            }
            Some(Err(e)) => info.load_error = Some(e.clone()),
            None => {}
        }
        if let Some(Err(e)) = &self.ctx {
            info.create_error = Some(e.clone());
        }
        info.devices = self.devices.clone();
        info
    }
}

fn emit(msg: &Message) {
    let mut out = std::io::stdout().lock();
    // If the parent is gone there is nobody to tell; the next write fails the same way.
    let _ = writeln!(out, "{}", msg.to_line());
    let _ = out.flush();
}
