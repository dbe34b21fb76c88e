//! A UI workflow given to a session: every ladder step is also written back as a UI workflow
//! (`NN-<increment>.ui.json` beside the API variant), and every run folder gets the UI form of
//! what it submitted (`workflow.ui.json`). Converting a written-back UI file gives exactly the
//! API variant (same canonical hash).

use comfy_bisect_core::catalog::Catalog;
use comfy_bisect_core::ladder::PlanOptions;
use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::session::driver::{
    Attempt, Backend, Driver, NoHooks, Recovery, RunSpec, SystemClock,
};
use comfy_bisect_core::session::journal::SessionOptions;
use comfy_bisect_core::session::prepare::{prepare, LadderConfig, Prepared};
use comfy_bisect_core::session::setup::create_session;
use comfy_bisect_core::workflow::{load_api_file, ui, Workflow};
use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

const NEWER: &str = "tests/fixtures/comfyui-newer/object_info.json";
const TEMPLATE: &str = "tests/corpus/templates/image_qwen_image_2512_with_2steps_lora.json";

/// A server that answers the first liveness check, then is gone: the driver writes the first
/// run's folder, the submission fails, and the session stops as "server lost".
struct Absent {
    checks: usize,
    /// The run folder's `workflow.ui.json`, as the driver had written it when submitting.
    seen_ui: Rc<RefCell<Option<Vec<u8>>>>,
}

impl Backend for Absent {
    fn run(&mut self, spec: &RunSpec<'_>) -> Attempt {
        let run_dir = spec.events_file.parent().unwrap();
        assert!(run_dir.join("workflow.json").exists());
        *self.seen_ui.borrow_mut() = std::fs::read(run_dir.join("workflow.ui.json")).ok();
        Attempt::NotSubmitted("no server in this test".into())
    }
    fn recover(&mut self, _run_id: &str, _workflow: &Workflow, _events: &Path) -> Recovery {
        Recovery::Unknown
    }
    fn alive(&mut self) -> bool {
        self.checks += 1;
        self.checks == 1
    }
    fn restart(&mut self, _command: &str) -> Result<(), String> {
        Err("no restart in this test".into())
    }
}

/// The fixture definitions with every combo value `workflow` uses added to its list.
fn with_files_of(workflow: &Workflow) -> NodeDefs {
    let mut info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(NEWER).unwrap()).unwrap();
    for node in workflow.nodes.values() {
        for (name, input) in &node.inputs {
            let Some(value) = input.as_literal().filter(|v| v.is_string()) else {
                continue;
            };
            for section in ["required", "optional"] {
                let spec = &mut info[&node.class_type]["input"][section][name];
                if let Some(list) = spec.get_mut(0).and_then(|t| t.as_array_mut()) {
                    if !list.contains(value) {
                        list.push(value.clone());
                    }
                }
            }
        }
    }
    NodeDefs::from_value(&info).unwrap()
}

#[test]
fn session_variants_and_runs_of_a_ui_workflow_get_ui_companions() {
    let defs = NodeDefs::load_file(Path::new(NEWER)).unwrap();
    let loaded = ui::load_workflow_file(Path::new(TEMPLATE), &defs).unwrap();
    assert!(loaded.ui.is_some());
    // A server that has the template's model files: list every combo value the workflow uses.
    let defs = with_files_of(&loaded.workflow);
    let loaded = ui::load_workflow_file(Path::new(TEMPLATE), &defs).unwrap();
    let config = LadderConfig {
        catalog: Catalog::builtin(),
        options: PlanOptions::default(),
        controls: false,
    };
    // The fixture server lacks the template's model files: preflight problems, but the
    // variants are prepared all the same.
    let prepared = match prepare(
        "qwen",
        TEMPLATE,
        loaded.workflow,
        loaded.ui.as_ref(),
        &defs,
        &config,
    ) {
        Prepared::Ready(w) => *w,
        Prepared::Problems { workflow, .. } => *workflow,
    };
    assert!(prepared.steps.len() >= 2);
    let tmp = tempfile::tempdir().unwrap();
    let options = SessionOptions {
        wait_server_s: 0,
        ..SessionOptions::default()
    };
    let (paths, session) =
        create_session(tmp.path(), "http://127.0.0.1:9", options, vec![prepared]).unwrap();
    for step in &session.workflows[0].steps {
        let api = load_api_file(&paths.dir.join(&step.file)).unwrap();
        let ui_file = paths.dir.join(step.file.replace(".json", ".ui.json"));
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&ui_file).unwrap()).unwrap();
        let back = ui::convert(&doc, &defs).unwrap();
        assert_eq!(back.workflow.sha256(), api.sha256(), "{}", step.file);
        assert_eq!(api.sha256(), step.sha256);
    }
    let minimal_ui = std::fs::read(
        paths.dir.join(
            session.workflows[0].steps[0]
                .file
                .replace(".json", ".ui.json"),
        ),
    )
    .unwrap();
    let seen_ui = Rc::new(RefCell::new(None));
    let backend = Absent {
        checks: 0,
        seen_ui: seen_ui.clone(),
    };
    let mut hooks = NoHooks;
    let mut driver = Driver::new(paths.clone(), session, backend, SystemClock, &mut hooks);
    let _ = driver.drive();
    assert_eq!(seen_ui.borrow().as_deref(), Some(minimal_ui.as_slice()));
}
