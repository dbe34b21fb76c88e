//! The widget list the frontend builds for a node class from its `/object_info` definition, and
//! the mapping of saved `widgets_values` onto it (positional arrays, or objects keyed by name).

use crate::nodedefs::{InputDef, InputKind, NodeDef, Section, DYNAMICCOMBO_V3};
use serde_json::{Map, Value};

/// What a widget slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotKind {
    /// A widget whose value is sent as the input of the same name.
    Input,
    /// `control_after_generate` (seed control); never sent.
    Control,
    /// An upload button or other UI-only widget; never sent.
    UiOnly,
}

/// One widget of a node with the value it holds.
#[derive(Debug, Clone)]
pub(crate) struct Widget {
    /// Widget name (the input name for `SlotKind::Input`, dotted for dynamic-combo children).
    pub name: String,
    pub kind: SlotKind,
    /// Position in the saved `widgets_values` array (or the key in the object form), when the
    /// value came from the file; `None` when it is the definition's default.
    pub saved_at: Option<SavedAt>,
    /// The value.
    pub value: Value,
    /// True for STRING widgets with `dynamicPrompts`.
    pub dynamic_prompts: bool,
}

/// Where a widget's value is stored in the node object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SavedAt {
    /// `widgets_values[i]`.
    Index(usize),
    /// `widgets_values[key]` (object form).
    Key(String),
}

/// The control modes the frontend writes after a seed-like widget.
pub(crate) const CONTROL_MODES: [&str; 5] = [
    "fixed",
    "increment",
    "decrement",
    "randomize",
    "increment-wrap",
];

/// Whether a saved value is a `control_after_generate` value: a mode string, or the boolean
/// older frontends saved (the frontend turns `true` into `randomize`, `false` into `fixed`).
pub(crate) fn is_control_value(v: &Value) -> bool {
    match v {
        Value::String(s) => CONTROL_MODES.contains(&s.as_str()),
        Value::Bool(_) => true,
        _ => false,
    }
}

/// Input types that the frontend draws as a widget (besides the basic ones and combos).
const FRONTEND_WIDGET_TYPES: [&str; 15] = [
    "COLOR",
    "COLORS",
    "CURVE",
    "BOUNDING_BOX",
    "BOUNDING_BOXES",
    "IMAGECOMPARE",
    "LOAD_3D",
    "LOAD_3D_ANIMATION",
    "PAINTER",
    "CAMERA_ANGLE_VIEW",
    "MARKDOWN",
    "WEBCAM",
    "AUDIO_RECORD",
    "IMAGEUPLOAD",
    "HISTOGRAM",
];

/// Classes the frontend's audio extension gives an `audioUI` player widget (a required input it
/// adds to their definition); the player's value, `""`, is sent with the prompt.
const AUDIO_UI_CLASSES: [&str; 6] = [
    "LoadAudio",
    "SaveAudio",
    "PreviewAudio",
    "SaveAudioMP3",
    "SaveAudioOpus",
    "SaveAudioAdvanced",
];

/// Widgets that frontend extensions add to some core classes, after the definition's widgets:
/// `(class, widget name, sent in the prompt)`.
const EXTENSION_WIDGETS: [(&str, &str, bool); 2] =
    [("SaveGLB", "image", true), ("Preview3D", "image", true)];

/// Widgets whose sent value is computed by the frontend at queue time from live UI state, not
/// read from the saved value: the image comparer sends two empty image slots, the 3D viewport
/// sends the state of a freshly opened viewer (nothing loaded, default camera).
fn queue_time_value(wtype: &str) -> Option<Value> {
    match wtype {
        "IMAGECOMPARE" => Some(serde_json::json!(["", ""])),
        "LOAD_3D" => Some(serde_json::json!({
            "image": "", "mask": "", "normal": "",
            "camera_info": {
                "position": {"x": 10, "y": 10, "z": 10.000000000000002},
                "target": {"x": 0, "y": 0, "z": 0},
                "zoom": 1, "cameraType": "perspective",
                "quaternion": {"x": -0.2798481423331213, "y": 0.3647051996310008,
                               "z": 0.11591689595929511, "w": 0.8804762392171493},
                "fov": 35, "aspect": 1, "near": 0.01, "far": 10000,
                "frustum": {"left": -5, "right": 5, "top": 5, "bottom": -5}
            },
            "recording": "", "model_3d_info": []
        })),
        _ => None,
    }
}

/// True for an input that is only a socket (`forceInput`, legacy `defaultInput`).
fn socket_only(input: &InputDef) -> bool {
    input.force_input()
        || input
            .options
            .get("defaultInput")
            .and_then(Value::as_bool)
            .unwrap_or(false)
}

/// The widget type an input's spec would make, ignoring `forceInput`.
fn raw_widget_type(input: &InputDef) -> Option<String> {
    let t = input
        .options
        .get("widgetType")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| input.type_name().to_string());
    match t.as_str() {
        "INT" | "FLOAT" | "STRING" | "BOOLEAN" | "COMBO" | DYNAMICCOMBO_V3 => Some(t),
        other if FRONTEND_WIDGET_TYPES.contains(&other) => Some(t),
        _ => None,
    }
}

/// How an input spec makes widgets: `None` for a pure socket.
fn widget_type(input: &InputDef) -> Option<String> {
    if socket_only(input) {
        return None;
    }
    raw_widget_type(input)
}

/// The number of saved values a layout takes, with or without slots for `forceInput` inputs
/// (older frontends kept a value for them). `None` when the layout depends on values
/// (dynamic combos).
fn layout_len(def: &NodeDef, with_forced: bool) -> Option<usize> {
    let mut n = 0;
    for input in def.visible_inputs() {
        let Some(t) = raw_widget_type(input) else {
            continue;
        };
        if t == DYNAMICCOMBO_V3 {
            return None;
        }
        if socket_only(input) && !with_forced {
            continue;
        }
        n += 1;
        if has_control(input, &t) {
            n += 1;
        }
    }
    Some(n)
}

/// True when a widget of this input gets a `control_after_generate` companion.
fn has_control(input: &InputDef, wtype: &str) -> bool {
    match input.options.get("control_after_generate") {
        Some(Value::Bool(b)) => *b && (wtype == "INT" || wtype == "COMBO"),
        Some(Value::String(_)) => wtype == "INT" || wtype == "COMBO",
        Some(_) => false,
        None => wtype == "INT" && (input.name == "seed" || input.name == "noise_seed"),
    }
}

/// True when the input is a widget input of this class (an input the widget list covers).
pub(crate) fn is_widget_input(def: &NodeDef, name: &str) -> bool {
    if let Some(input) = def.input(name) {
        return input.section != Section::Hidden && widget_type(input).is_some();
    }
    // Dynamic-combo children `parent.child`.
    if let Some((parent, child)) = name.split_once('.') {
        if let Some(p) = def.input(parent) {
            if p.type_name() == DYNAMICCOMBO_V3 {
                return option_children(p)
                    .iter()
                    .any(|(n, spec)| n == child && widget_type(spec).is_some());
            }
        }
    }
    false
}

/// Every child spec any option of a dynamic combo declares.
fn option_children(input: &InputDef) -> Vec<(String, InputDef)> {
    let mut out = Vec::new();
    for option in input
        .options
        .get("options")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for (key, section) in [
            ("required", Section::Required),
            ("optional", Section::Optional),
        ] {
            if let Some(m) = option
                .get("inputs")
                .and_then(|i| i.get(key))
                .and_then(Value::as_object)
            {
                for (n, spec) in m {
                    out.push((n.clone(), InputDef::from_spec(n, section, spec)));
                }
            }
        }
    }
    out
}

/// The default value the frontend gives a fresh widget.
pub(crate) fn default_for(input: &InputDef, wtype: &str) -> Value {
    if let Some(d) = input.default_value() {
        return d.clone();
    }
    match (&input.kind, wtype) {
        (InputKind::Combo { options, .. }, _) => options
            .first()
            .map(|o| match o {
                Value::Object(m) => m.get("key").cloned().unwrap_or(Value::Null),
                other => other.clone(),
            })
            .unwrap_or(Value::Null),
        (_, "INT") | (_, "FLOAT") => {
            let min = input.min().and_then(|n| n.as_f64()).unwrap_or(0.0);
            if min > 0.0 {
                Value::Number(input.min().expect("checked").clone())
            } else {
                Value::from(0)
            }
        }
        (_, "BOOLEAN") => Value::Bool(false),
        (_, "STRING") => Value::String(String::new()),
        (_, DYNAMICCOMBO_V3) => input
            .options
            .get("options")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|o| o.get("key"))
            .cloned()
            .unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// Reads saved values one widget at a time.
struct Cursor<'a> {
    values: Option<&'a [Value]>,
    object: Option<&'a Map<String, Value>>,
    pos: usize,
    /// The array keeps a (stale) slot for each `forceInput` input, as older frontends saved.
    legacy_forced: bool,
}

impl Cursor<'_> {
    fn take(&mut self, name: &str) -> Option<(SavedAt, Value)> {
        if let Some(obj) = self.object {
            return obj
                .get(name)
                .map(|v| (SavedAt::Key(name.to_string()), v.clone()));
        }
        let values = self.values?;
        let i = self.pos;
        self.pos += 1;
        values.get(i).map(|v| (SavedAt::Index(i), v.clone()))
    }

    fn peek(&self) -> Option<&Value> {
        self.values?.get(self.pos)
    }
}

/// Builds the widgets of `def` holding the saved values (`widgets_values` as saved).
pub(crate) fn map_widgets(def: &NodeDef, saved: Option<&Value>) -> Vec<Widget> {
    let values = saved.and_then(Value::as_array).map(Vec::as_slice);
    let legacy_forced = match (values, layout_len(def, false), layout_len(def, true)) {
        (Some(v), Some(plain), Some(forced)) => forced != plain && v.len() == forced,
        _ => false,
    };
    let mut cursor = Cursor {
        values,
        object: saved.and_then(Value::as_object),
        pos: 0,
        legacy_forced,
    };
    let mut out = Vec::new();
    let required: Vec<&InputDef> = def
        .inputs
        .iter()
        .filter(|i| i.section == Section::Required)
        .collect();
    let optional: Vec<&InputDef> = def
        .inputs
        .iter()
        .filter(|i| i.section == Section::Optional)
        .collect();
    for input in &required {
        push_input(input, "", &mut cursor, &mut out);
    }
    if required.iter().any(|i| {
        ["image_upload", "video_upload", "animated_image_upload"]
            .iter()
            .any(|k| i.options.get(*k).and_then(Value::as_bool) == Some(true))
    }) {
        push_ui_only("upload", &mut cursor, &mut out);
    }
    let audio_upload = required
        .iter()
        .any(|i| i.options.get("audio_upload").and_then(Value::as_bool) == Some(true));
    if AUDIO_UI_CLASSES.contains(&def.name.as_str()) {
        // The audio player the frontend adds to these classes as a required input: a DOM
        // widget whose (empty) value is queued with the prompt.
        push_dom_widget(
            "audioUI",
            Value::String(String::new()),
            &mut cursor,
            &mut out,
        );
    } else if audio_upload {
        push_ui_only("audioUI", &mut cursor, &mut out);
    }
    if audio_upload {
        push_ui_only("upload", &mut cursor, &mut out);
    }
    for input in &optional {
        push_input(input, "", &mut cursor, &mut out);
    }
    if def.name == "CustomCombo" {
        // The frontend's custom-combo extension: an `index` widget, then one text widget per
        // option (`option1`, `option2`, …; the last one is the empty "add" slot).
        push_extension("index", &mut cursor, &mut out);
        let mut n = 1;
        while cursor.peek().is_some() {
            push_extension(&format!("option{n}"), &mut cursor, &mut out);
            n += 1;
        }
    }
    // A remote combo with a refresh button (LoadImageOutput): the button is a widget named
    // `refresh` whose value, "refresh", is queued with the prompt. Its saved slot (if any)
    // follows the UI-only widgets, so it is not read.
    if def.visible_inputs().any(|i| {
        i.options
            .get("remote")
            .and_then(|r| r.get("refresh_button"))
            == Some(&Value::Bool(true))
    }) {
        out.push(Widget {
            name: "refresh".into(),
            kind: SlotKind::Input,
            saved_at: None,
            value: Value::String("refresh".into()),
            dynamic_prompts: false,
        });
    }
    legacy_values(def, &mut out);
    for (class, name, sent) in EXTENSION_WIDGETS {
        if class == def.name {
            if let Some((at, value)) = cursor.take(name) {
                out.push(Widget {
                    name: name.to_string(),
                    kind: if sent {
                        SlotKind::Input
                    } else {
                        SlotKind::UiOnly
                    },
                    saved_at: Some(at),
                    value,
                    dynamic_prompts: false,
                });
            }
        }
    }
    out
}

/// Values older saves hold that the frontend fixes when it loads the workflow: a sampler name
/// with the `sample_` prefix of early ComfyUI (`sample_euler`) on `KSampler` and
/// `KSamplerAdvanced` loses it; a boolean control mode becomes `randomize` / `fixed` (on every
/// class; never sent, but kept readable).
fn legacy_values(def: &NodeDef, widgets: &mut [Widget]) {
    for w in widgets.iter_mut() {
        match (&w.kind, &w.value) {
            (SlotKind::Input, Value::String(s))
                if w.name == "sampler_name"
                    && matches!(def.name.as_str(), "KSampler" | "KSamplerAdvanced")
                    && s.starts_with("sample_") =>
            {
                w.value = Value::String(s["sample_".len()..].to_string());
            }
            (SlotKind::Control, Value::Bool(b)) => {
                w.value = Value::from(if *b { "randomize" } else { "fixed" });
            }
            _ => {}
        }
    }
}

fn push_extension(name: &str, cursor: &mut Cursor<'_>, out: &mut Vec<Widget>) {
    if let Some((at, value)) = cursor.take(name) {
        out.push(Widget {
            name: name.to_string(),
            kind: SlotKind::Input,
            saved_at: Some(at),
            value,
            dynamic_prompts: false,
        });
    }
}

/// A DOM widget whose value the frontend computes at queue time (`value`) and sends; its saved
/// slot, if the save has one, is consumed but not read.
fn push_dom_widget(name: &str, value: Value, cursor: &mut Cursor<'_>, out: &mut Vec<Widget>) {
    let taken = cursor.take(name);
    out.push(Widget {
        name: name.to_string(),
        kind: SlotKind::Input,
        saved_at: taken.map(|t| t.0),
        value,
        dynamic_prompts: false,
    });
}

fn push_ui_only(name: &str, cursor: &mut Cursor<'_>, out: &mut Vec<Widget>) {
    let taken = cursor.take(name);
    out.push(Widget {
        name: name.to_string(),
        kind: SlotKind::UiOnly,
        saved_at: taken.as_ref().map(|t| t.0.clone()),
        value: taken.map(|t| t.1).unwrap_or(Value::Null),
        dynamic_prompts: false,
    });
}

fn push_input(input: &InputDef, prefix: &str, cursor: &mut Cursor<'_>, out: &mut Vec<Widget>) {
    let Some(wtype) = widget_type(input) else {
        if cursor.legacy_forced && socket_only(input) && raw_widget_type(input).is_some() {
            push_ui_only(&format!("{prefix}{}", input.name), cursor, out);
        }
        return;
    };
    let name = format!("{prefix}{}", input.name);
    let taken = cursor.take(&name);
    let value = match queue_time_value(&wtype) {
        Some(v) => v,
        None => taken
            .as_ref()
            .map(|t| t.1.clone())
            .unwrap_or_else(|| default_for(input, &wtype)),
    };
    out.push(Widget {
        name: name.clone(),
        kind: SlotKind::Input,
        saved_at: taken.map(|t| t.0),
        value: value.clone(),
        dynamic_prompts: input
            .options
            .get("dynamicPrompts")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    });
    if has_control(input, &wtype) {
        // The frontend assigns saved values to its widgets by position, so the companion slot
        // takes the next value whatever it is: a mode string, a legacy boolean (`true` =
        // randomize, `false` = fixed, from the time the control was a toggle), or a value a
        // save without the slot put there. Widgets of a dynamic combo's option are the
        // exception: the frontend saves them without a companion slot, so one is only
        // recognised by its value.
        let present = match cursor.peek() {
            Some(v) if prefix.is_empty() => cursor.object.is_none() || is_control_value(v),
            Some(v) => is_control_value(v),
            None => cursor.object.is_some(),
        };
        if present {
            let taken = cursor.take("control_after_generate");
            out.push(Widget {
                name: format!("{name}.control_after_generate"),
                kind: SlotKind::Control,
                saved_at: taken.as_ref().map(|t| t.0.clone()),
                value: taken.map(|t| t.1).unwrap_or(Value::Null),
                dynamic_prompts: false,
            });
        }
    }
    if wtype == DYNAMICCOMBO_V3 {
        let Some(selected) = value.as_str() else {
            return;
        };
        let Some(option) = input
            .options
            .get("options")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|o| o.get("key").and_then(Value::as_str) == Some(selected))
            })
        else {
            return;
        };
        let child_prefix = format!("{name}.");
        for (key, section) in [
            ("required", Section::Required),
            ("optional", Section::Optional),
        ] {
            if let Some(m) = option
                .get("inputs")
                .and_then(|i| i.get(key))
                .and_then(Value::as_object)
            {
                for (n, spec) in m {
                    let child = InputDef::from_spec(n, section, spec);
                    push_input(&child, &child_prefix, cursor, out);
                }
            }
        }
    }
}

/// The sockets a node of this class has in the frontend, in order: every visible input of the
/// definition (widget inputs own a socket too), with its type; dynamic-combo children follow
/// their parent for the selected option.
pub(crate) fn live_inputs(def: &NodeDef, widgets: &[Widget]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for input in def.visible_inputs() {
        out.push((input.name.clone(), input.type_name().to_string()));
        if input.type_name() == DYNAMICCOMBO_V3 {
            let selected = widgets
                .iter()
                .find(|w| w.name == input.name)
                .map(|w| w.value.clone());
            if let Some(option) = selected.as_ref().and_then(Value::as_str).and_then(|s| {
                input
                    .options
                    .get("options")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .find(|o| o.get("key").and_then(Value::as_str) == Some(s))
                    })
            }) {
                for key in ["required", "optional"] {
                    if let Some(m) = option
                        .get("inputs")
                        .and_then(|i| i.get(key))
                        .and_then(Value::as_object)
                    {
                        for (n, spec) in m {
                            let child = InputDef::from_spec(n, Section::Optional, spec);
                            out.push((
                                format!("{}.{n}", input.name),
                                child.type_name().to_string(),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

/// The value as the frontend serializes it: arrays are wrapped as `{"__value__": [...]}`.
pub(crate) fn serialize_value(v: Value) -> Value {
    match v {
        Value::Array(items) => {
            let mut m = Map::new();
            m.insert("__value__".into(), Value::Array(items));
            Value::Object(m)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodedefs::NodeDefs;
    use serde_json::json;

    fn defs() -> NodeDefs {
        NodeDefs::from_value(&json!({
            "KSampler": {"input": {"required": {"model": ["MODEL"], "seed": ["INT", {"control_after_generate": true}],
                "steps": ["INT", {"default": 20}], "sampler_name": [["euler"], {}], "denoise": ["FLOAT", {"default": 1.0}]}},
                "input_order": {"required": ["model", "seed", "steps", "sampler_name", "denoise"]}},
            "Resize": {"input": {"required": {"image": ["IMAGE"], "resize_type": ["COMFY_DYNAMICCOMBO_V3", {"options": [
                    {"key": "scale by", "inputs": {"required": {"scale": ["FLOAT", {"default": 1.0}]}}},
                    {"key": "dimensions", "inputs": {"required": {"width": ["INT", {"default": 512}], "height": ["INT", {"default": 512}]}}}]}],
                "method": [["area", "bilinear"], {}]}},
                "input_order": {"required": ["image", "resize_type", "method"]}}
        }))
        .unwrap()
    }

    fn sent(def: &str, values: Value) -> Vec<(String, Value, Option<SavedAt>)> {
        let defs = defs();
        map_widgets(defs.get(def).unwrap(), Some(&values))
            .into_iter()
            .filter(|w| w.kind == SlotKind::Input)
            .map(|w| (w.name, w.value, w.saved_at))
            .collect()
    }

    #[test]
    fn control_slot_and_defaults() {
        let w = sent("KSampler", json!([5, "fixed", 30]));
        assert_eq!(w[0], ("seed".into(), json!(5), Some(SavedAt::Index(0))));
        assert_eq!(w[1], ("steps".into(), json!(30), Some(SavedAt::Index(2))));
        assert_eq!(w[2], ("sampler_name".into(), json!("euler"), None));
        assert_eq!(w[3].1, json!(1.0));
    }

    #[test]
    fn legacy_boolean_control_is_consumed_by_position() {
        let w = sent("KSampler", json!([7, true, 20, "euler", 0.6]));
        assert_eq!(w[1], ("steps".into(), json!(20), Some(SavedAt::Index(2))));
        assert_eq!(w[2].1, json!("euler"));
        assert_eq!(w[3].1, json!(0.6));
        let w = sent("KSampler", json!([7, false, 12]));
        assert_eq!(w[1].1, json!(12));
        // A save without the slot: the frontend zips by position, and so does convert.
        let w = sent("KSampler", json!([7, 30, "euler"]));
        assert_eq!(
            w[1],
            ("steps".into(), json!("euler"), Some(SavedAt::Index(2)))
        );
        // The control widget reads the legacy boolean as the mode the frontend gives it.
        let defs = defs();
        let all = map_widgets(defs.get("KSampler").unwrap(), Some(&json!([7, true, 20])));
        let control = all.iter().find(|w| w.kind == SlotKind::Control).unwrap();
        assert_eq!(control.value, json!("randomize"));
    }

    #[test]
    fn legacy_sampler_name_prefix_is_stripped_on_ksampler_only() {
        let w = sent("KSampler", json!([7, "fixed", 20, "sample_euler", 1.0]));
        assert_eq!(w[2].1, json!("euler"));
        assert_eq!(w[2].2, Some(SavedAt::Index(3)));
    }

    #[test]
    fn dynamic_combo_children_follow_the_selected_option() {
        let w = sent("Resize", json!(["dimensions", 640, 480, "bilinear"]));
        let names: Vec<&str> = w.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "resize_type",
                "resize_type.width",
                "resize_type.height",
                "method"
            ]
        );
        assert_eq!(w[3].1, json!("bilinear"));
        let w = sent("Resize", json!(["scale by", 2.0, "area"]));
        assert_eq!(
            w[1],
            (
                "resize_type.scale".into(),
                json!(2.0),
                Some(SavedAt::Index(1))
            )
        );
    }

    #[test]
    fn arrays_are_wrapped() {
        assert_eq!(serialize_value(json!([1, 2])), json!({"__value__": [1, 2]}));
        assert_eq!(serialize_value(json!("x")), json!("x"));
    }
}
