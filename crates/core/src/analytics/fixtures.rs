//! Records and memory events the analytics' unit tests share (test builds only).

use crate::comfy::console::LoadFigures;
use crate::comfy::MemoryEvent;
use crate::run::RunRecord;
use crate::workflow::Workflow;

/// A passed run of `workflow` with these memory events and nothing timed.
pub(super) fn passed_with(workflow: &Workflow, events: Vec<MemoryEvent>) -> RunRecord {
    let mut r = crate::session::evidence::bare_record(
        "r",
        workflow,
        "http://127.0.0.1:8188",
        false,
        crate::run::Outcome::Passed,
    );
    r.memory_events = events;
    r
}

/// A WAN21 model loaded partially (9178 MB), with `offloaded_mb` when the console printed it.
pub(super) fn partial_load(offloaded_mb: Option<f64>) -> MemoryEvent {
    MemoryEvent::ModelLoad {
        t: None,
        class: Some("WAN21".into()),
        figures: LoadFigures {
            full: false,
            usable_mb: Some(9178.35),
            loaded_mb: 9177.97,
            offloaded_mb,
            lowvram_patches: Some(0),
        },
    }
}

/// A dynamic VRAM staging line of a WAN21 model of `mb` MB.
pub(super) fn staged(mb: u64) -> MemoryEvent {
    MemoryEvent::Staged {
        t: None,
        class: "WAN21".into(),
        mb,
    }
}
