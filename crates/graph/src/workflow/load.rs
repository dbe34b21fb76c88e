//! Reading workflow files (JSON, or the workflow ComfyUI saved inside an image, audio or video
//! file: [`super::embedded`]) and API-format workflows, with structural errors that name the
//! file, node, class and input.

use super::embedded::{self, Container, Embedded, ExtractError, SourceFile};
use super::{Input, Link, Node, Workflow};
use indexmap::IndexMap;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// Which format a workflow file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `{node_id: {class_type, inputs}}`.
    Api,
    /// A POST /prompt body `{"prompt": {...}, ...}`.
    PromptBody,
    /// What the ComfyUI frontend's "Save" writes: `nodes` and `links`.
    Ui,
}

/// A workflow file that cannot be used, with what, where and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("{file}: cannot read the workflow: {source}")]
    Read {
        /// File name.
        file: String,
        /// Underlying error.
        source: std::io::Error,
    },
    /// Not JSON.
    #[error("{file}: not valid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's message.
        message: String,
    },
    /// A UI-format file where an API-format one is needed.
    #[error("{file}: this is a UI-format workflow (it has `nodes` and `links`, as ComfyUI's \"Save\" writes it); {hint}")]
    UiFormat {
        /// File name.
        file: String,
        /// What to do instead.
        hint: String,
    },
    /// The top level is not an object of nodes.
    #[error("{file}: {message}")]
    Shape {
        /// File name.
        file: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A node object without `class_type`.
    #[error("{file}: node '{node}' has no class_type; every node must name its class (the workflow may be corrupted or exported incompletely)")]
    MissingClassType {
        /// File name.
        file: String,
        /// Node id.
        node: String,
    },
    /// An input that is neither a literal nor a valid link.
    #[error("{file}: node '{node}' ({class}), input '{input}': {message}")]
    BadInput {
        /// File name.
        file: String,
        /// Node id.
        node: String,
        /// Class of the node.
        class: String,
        /// Input name.
        input: String,
        /// What is wrong.
        message: String,
    },
    /// A link to a node id that is not in the workflow.
    #[error("{file}: node '{node}' ({class}), input '{input}' links to node '{target}', which is not in the workflow")]
    MissingLinkTarget {
        /// File name.
        file: String,
        /// Node id.
        node: String,
        /// Class of the node.
        class: String,
        /// Input name.
        input: String,
        /// The missing id.
        target: String,
    },
    /// A file ComfyUI saves (an image, audio or video) with no workflow inside.
    #[error("{file}: this {container} file holds no ComfyUI workflow. ComfyUI writes the workflow into the PNG, WebP, FLAC, MP3, Opus, MP4 and WebM files its savers make, unless it was started with `--disable-metadata`, the saving node does not write it (or strips it), or the file was re-encoded or shared through a site that removes metadata. Give the workflow as JSON instead: in ComfyUI, Workflow → Export (or Export (API))")]
    NoWorkflowInside {
        /// File name.
        file: String,
        /// What the file is.
        container: Container,
    },
    /// The workflow saved in an image, audio or video file cannot be read.
    #[error("{file}: cannot read the workflow saved in this {container} file: {message}; export the workflow from ComfyUI as JSON instead (Workflow → Export)")]
    Embedded {
        /// File name.
        file: String,
        /// What the file is.
        container: Container,
        /// What is wrong.
        message: String,
    },
    /// Neither JSON text nor a file ComfyUI saves its workflow in.
    #[error("{file}: not a workflow: the file is not JSON text{}, nor a PNG, WebP, FLAC, MP3, Opus, MP4 or WebM file ComfyUI saved; give the workflow JSON (ComfyUI: Workflow → Export) or a file ComfyUI saved", utf16_note(.utf16))]
    NotText {
        /// File name.
        file: String,
        /// True when it looks like UTF-16 text.
        utf16: bool,
    },
    /// The links form a cycle.
    #[error("{file}: the links form a cycle through nodes {}; a workflow must be acyclic", cycle_list(.nodes))]
    Cycle {
        /// File name.
        file: String,
        /// The nodes on the cycle, in link order.
        nodes: Vec<String>,
    },
}

/// True for a UI-format document (what ComfyUI's "Save" writes), version 0.4 or 1.
pub fn is_ui_document(value: &Value) -> bool {
    detect_format(value) == Format::Ui
}

/// Tells the format of a parsed workflow file.
pub(crate) fn detect_format(value: &Value) -> Format {
    match value {
        Value::Object(map) if map.contains_key("nodes") && map.contains_key("links") => Format::Ui,
        // A version-1 UI file may leave out `links` (the frontend's schema has it optional).
        Value::Object(map)
            if map.get("nodes").is_some_and(Value::is_array)
                && map.get("version").and_then(Value::as_f64) == Some(1.0) =>
        {
            Format::Ui
        }
        Value::Object(map) if map.get("prompt").is_some_and(Value::is_object) => Format::PromptBody,
        _ => Format::Api,
    }
}

/// Reads an API-format workflow file (also a POST /prompt body, or a file ComfyUI saved with
/// only the API prompt inside; one with a UI workflow inside is [`LoadError::UiFormat`]).
pub fn load_api_file(path: &Path) -> Result<Workflow, LoadError> {
    let file = path.display().to_string();
    let document = read_document(path)?;
    parse_api(&document.value, &file)
}

/// A workflow file's JSON document, and the saved file it came from when it was read out of an
/// image, audio or video file.
#[derive(Debug, Clone)]
pub struct Document {
    /// The JSON document (API, POST /prompt body or UI format).
    pub value: Value,
    /// The saved file it was read from, when it was one.
    pub source: Option<SourceFile>,
}

impl Document {
    /// True for a UI-format document (converting it needs node definitions).
    pub fn is_ui(&self) -> bool {
        is_ui_document(&self.value)
    }
}

/// Reads a workflow file: JSON text, or a file ComfyUI saved (told by its first bytes, not its
/// name), whose UI workflow is taken when it holds one and its API prompt otherwise.
pub fn read_document(path: &Path) -> Result<Document, LoadError> {
    use std::io::Read;
    let file = path.display().to_string();
    let read_err = |source| LoadError::Read {
        file: file.clone(),
        source,
    };
    let mut handle = std::fs::File::open(path).map_err(read_err)?;
    let mut head = [0; 16];
    let n = embedded::read_up_to(&mut handle, &mut head).map_err(read_err)?;
    if let Some(container) = Container::sniff(&head[..n]) {
        return read_saved(handle, container, path, &file);
    }
    let mut bytes = head[..n].to_vec();
    handle.read_to_end(&mut bytes).map_err(read_err)?;
    let text = String::from_utf8(bytes).map_err(|e| LoadError::NotText {
        file: file.clone(),
        utf16: matches!(e.as_bytes(), [0xff, 0xfe, ..] | [0xfe, 0xff, ..]),
    })?;
    Ok(Document {
        value: parse_json(&text, &file)?,
        source: None,
    })
}

/// The workflow inside a saved file, with its name and sha256.
fn read_saved(
    handle: std::fs::File,
    container: Container,
    path: &Path,
    file: &str,
) -> Result<Document, LoadError> {
    let mut reader = std::io::BufReader::new(handle);
    let found = embedded::extract(&mut reader, container).map_err(|e| match e {
        ExtractError::Io(source) => LoadError::Read {
            file: file.to_string(),
            source,
        },
        ExtractError::Damaged(message) => LoadError::Embedded {
            file: file.to_string(),
            container,
            message,
        },
        ExtractError::NotJson { key, message } => LoadError::Embedded {
            file: file.to_string(),
            container,
            message: format!("its `{key}` text is not JSON ({message})"),
        },
    })?;
    let both = found.workflow.is_some() && found.prompt.is_some();
    let (value, used) = match (found.workflow, found.prompt) {
        (Some(ui), _) if is_ui_document(&ui) => (ui, Embedded::Workflow),
        (_, Some(prompt)) => (prompt, Embedded::Prompt),
        (Some(other), None) => (other, Embedded::Workflow),
        (None, None) => {
            return Err(LoadError::NoWorkflowInside {
                file: file.to_string(),
                container,
            })
        }
    };
    let sha256 = file_sha256(reader.into_inner()).map_err(|source| LoadError::Read {
        file: file.to_string(),
        source,
    })?;
    Ok(Document {
        value,
        source: Some(SourceFile {
            file: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.to_string()),
            sha256,
            container: container.name().to_string(),
            embedded: used,
            both,
        }),
    })
}

/// sha256 (lower hex) of a whole file, read in pieces.
fn file_sha256(mut handle: std::fs::File) -> std::io::Result<String> {
    use sha2::Digest;
    use std::io::{Read, Seek};
    handle.seek(std::io::SeekFrom::Start(0))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0; 1 << 16];
    loop {
        match handle.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

fn utf16_note(utf16: &bool) -> &'static str {
    if *utf16 {
        " (it looks like UTF-16 text: save it as UTF-8)"
    } else {
        ""
    }
}

/// Parses JSON text, reporting syntax errors with line and column.
/// How many nodes of a cycle its error names.
const CYCLE_NAMED: usize = 20;

/// The nodes of a cycle for its error: the first [`CYCLE_NAMED`] and how many more.
fn cycle_list(nodes: &[String]) -> String {
    let shown = nodes[..nodes.len().min(CYCLE_NAMED)].join(" → ");
    match nodes.len().saturating_sub(CYCLE_NAMED) {
        0 => shown,
        more => format!("{shown} → … and {more} more"),
    }
}

pub(crate) fn parse_json(text: &str, file: &str) -> Result<Value, LoadError> {
    // Editors on Windows save UTF-8 with a byte-order mark; JSON parsers must not see it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|e| LoadError::Syntax {
        file: file.to_string(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}

/// Builds a workflow from a parsed API-format document; `file` names it in errors.
pub fn parse_api(value: &Value, file: &str) -> Result<Workflow, LoadError> {
    let nodes_value = match detect_format(value) {
        Format::Ui => {
            return Err(LoadError::UiFormat {
                file: file.to_string(),
                hint: "this command needs the API format: in ComfyUI use \"Export (API)\", or convert it with `comfy-bisect convert`".to_string(),
            })
        }
        Format::PromptBody => &value["prompt"],
        Format::Api => value,
    };
    let Some(map) = nodes_value.as_object() else {
        return Err(LoadError::Shape {
            file: file.to_string(),
            message: "an API-format workflow must be a JSON object of nodes, {\"<id>\": {\"class_type\": …, \"inputs\": {…}}}".to_string(),
        });
    };
    if map.is_empty() {
        return Err(LoadError::Shape {
            file: file.to_string(),
            message: "the workflow has no nodes".to_string(),
        });
    }
    let mut nodes = super::Nodes::with_capacity_and_hasher(map.len(), Default::default());
    for (id, node_value) in map {
        nodes.insert(id.clone(), Arc::new(parse_node(id, node_value, file)?));
    }
    let workflow = Workflow { nodes };
    check_links(&workflow, file)?;
    if let Some(cycle) = workflow.find_cycle() {
        return Err(LoadError::Cycle {
            file: file.to_string(),
            nodes: cycle,
        });
    }
    Ok(workflow)
}

fn parse_node(id: &str, value: &Value, file: &str) -> Result<Node, LoadError> {
    let Some(obj) = value.as_object() else {
        return Err(LoadError::Shape {
            file: file.to_string(),
            message: format!(
                "entry '{id}' is not a node object (found {}); API-format files hold only nodes",
                kind_of(value)
            ),
        });
    };
    let class_type = match obj.get("class_type") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(LoadError::MissingClassType {
                file: file.to_string(),
                node: id.to_string(),
            })
        }
    };
    let mut inputs = IndexMap::new();
    match obj.get("inputs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, v) in map {
                let input = parse_input(v).map_err(|message| LoadError::BadInput {
                    file: file.to_string(),
                    node: id.to_string(),
                    class: class_type.clone(),
                    input: name.clone(),
                    message,
                })?;
                inputs.insert(name.clone(), input);
            }
        }
        Some(other) => {
            return Err(LoadError::Shape {
                file: file.to_string(),
                message: format!(
                    "node '{id}' ({class_type}): `inputs` must be an object, found {}",
                    kind_of(other)
                ),
            })
        }
    }
    let mut extra = Map::new();
    for (k, v) in obj {
        if !matches!(k.as_str(), "class_type" | "inputs" | "_meta") {
            extra.insert(k.clone(), v.clone());
        }
    }
    Ok(Node {
        class_type,
        inputs,
        meta: obj.get("_meta").cloned(),
        extra,
    })
}

/// Reads one input value: a 2-element array whose first element is a string is a link.
fn parse_input(value: &Value) -> Result<Input, String> {
    let Value::Array(items) = value else {
        return Ok(Input::Literal(value.clone()));
    };
    match items.as_slice() {
        [Value::String(node), slot] => match slot.as_u64() {
            Some(slot) => Ok(Input::Link(Link {
                node: node.clone(),
                slot: slot as usize,
            })),
            None => Err(format!(
                "link [\"{node}\", {slot}] has an output slot that is not a non-negative integer; a link is [\"<node id>\", <output index ≥ 0>]"
            )),
        },
        _ => Err(format!(
            "the array {} is neither a link [\"<node id>\", <output index>] nor a wrapped literal; write a literal list as {{\"__value__\": [...]}}",
            truncate(&value.to_string(), 80)
        )),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max).collect::<String>())
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn check_links(workflow: &Workflow, file: &str) -> Result<(), LoadError> {
    for (id, node) in &workflow.nodes {
        for (name, input) in &node.inputs {
            if let Input::Link(link) = input {
                if !workflow.nodes.contains_key(&link.node) {
                    return Err(LoadError::MissingLinkTarget {
                        file: file.to_string(),
                        node: id.clone(),
                        class: node.class_type.clone(),
                        input: name.clone(),
                        target: link.node.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

impl Workflow {
    /// Reads an API-format workflow from JSON text.
    pub fn from_json_str(text: &str, file: &str) -> Result<Workflow, LoadError> {
        parse_api(&parse_json(text, file)?, file)
    }
}
