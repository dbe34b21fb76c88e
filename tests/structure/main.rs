//! The house: the codemap, the module graph and the repository's self-containment (one test
//! binary; each feature file is a module), and the foundation as a user meets it.

mod architecture;
mod foundation;
mod module_cycles;
mod self_contained;
