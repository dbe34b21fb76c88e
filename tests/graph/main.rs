//! The workflow graph offline, no server: UI conversion, the ladder and plans, the input parsers,
//! the captured outputs and consoles, and hashing (one test binary; each feature file is a module).

mod console_fixtures;
mod hashing;
mod input_parsers;
mod ladder_reductions;
mod outputs_fixtures;
mod plan_corpus;
mod plan_fixtures;
mod plan_ui;
mod ui_2026;
mod ui_corpus;
mod ui_corpus_validate;
mod ui_dom_widgets;
mod ui_legacy;
mod ui_rules;
mod ui_writeback;
