//! One test per conversion rule of docs/ui-format.md, on small hand-written UI workflows, plus
//! the write-back round trip and the `convert` command.

use comfy_bisect_core::nodedefs::NodeDefs;
use comfy_bisect_core::workflow::edit::Edit;
use comfy_bisect_core::workflow::ui::{convert, write_variant, UiError};
use serde_json::{json, Value};

/// Core-like definitions (as `/object_info` reports them) for the tests.
fn defs() -> NodeDefs {
    let v: Value = serde_json::from_str(include_str!("../fixtures/ui_object_info.json")).unwrap();
    NodeDefs::from_value(&v).unwrap()
}

fn node(id: i64, ty: &str, inputs: Value, outputs: Value, widgets: Value) -> Value {
    json!({"id": id, "type": ty, "mode": 0, "inputs": inputs, "outputs": outputs, "properties": {}, "widgets_values": widgets})
}

fn inp(name: &str, ty: &str, link: Option<i64>) -> Value {
    json!({"name": name, "type": ty, "link": link})
}

fn out(ty: &str, links: &[i64]) -> Value {
    json!({"name": ty, "type": ty, "links": links})
}

fn ui(nodes: Vec<Value>, links: Value) -> Value {
    json!({"last_node_id": 100, "last_link_id": 100, "version": 0.4, "nodes": nodes, "links": links, "groups": []})
}

fn prompt(ui: &Value) -> Value {
    let c = convert(ui, &defs()).unwrap_or_else(|e| panic!("conversion failed: {e}"));
    let mut v = c.workflow.to_value();
    for n in v.as_object_mut().unwrap().values_mut() {
        n.as_object_mut().unwrap().remove("_meta");
    }
    v
}

fn inputs(p: &Value, id: &str) -> Value {
    p[id]["inputs"].clone()
}

/// The worked example of the conversion notes (§9): bypassed LoRA, PrimitiveNode seed, Reroute,
/// Note, and a subgraph whose promoted widget is unlinked while its other inputs are linked.
fn worked_example() -> Value {
    serde_json::from_str(include_str!("../fixtures/ui_worked_example.json")).unwrap()
}

#[test]
fn worked_example_converts_like_the_frontend() {
    let p = prompt(&worked_example());
    let want = json!({
        "4": {"inputs": {"ckpt_name": "sd15.safetensors"}, "class_type": "CheckpointLoaderSimple"},
        "6": {"inputs": {"text": "a photo of a fox", "clip": ["4", 1]}, "class_type": "CLIPTextEncode"},
        "7": {"inputs": {"text": "blurry", "clip": ["4", 1]}, "class_type": "CLIPTextEncode"},
        "5": {"inputs": {"width": 512, "height": 512, "batch_size": 1}, "class_type": "EmptyLatentImage"},
        "3": {"inputs": {"seed": 1234, "steps": 20, "cfg": 7, "sampler_name": "euler", "scheduler": "normal", "denoise": 1,
                         "model": ["4", 0], "positive": ["6", 0], "negative": ["7", 0], "latent_image": ["5", 0]},
              "class_type": "KSampler"},
        "20:1": {"inputs": {"samples": ["3", 0], "vae": ["4", 2]}, "class_type": "VAEDecode"},
        "20:2": {"inputs": {"filename_prefix": "fox", "images": ["20:1", 0]}, "class_type": "SaveImage"}
    });
    assert_eq!(p, want);
    let c = convert(&worked_example(), &defs()).unwrap();
    assert_eq!(c.workflow.nodes["6"].title(), Some("Positive"));
    assert_eq!(
        c.workflow.nodes["7"].title(),
        Some("CLIP Text Encode (Prompt)")
    );
    let origin = &c.provenance["20:2"];
    assert_eq!(origin.scope, vec!["20".to_string()]);
    assert_eq!(origin.node_id, "2");
    assert!(origin.definition.is_some());
}

#[test]
fn bypass_prefers_same_index_then_first_exact_type_and_drops_unconnected() {
    // ImageScale bypassed: IMAGE output 0 ← input 0 (same index, compatible).
    // Blend bypassed with image1 unlinked: output 0 wants IMAGE → input 0 is unconnected → dropped.
    let ui = ui(
        vec![
            node(
                1,
                "LoadImage",
                json!([]),
                json!([out("IMAGE", &[1]), out("MASK", &[2])]),
                json!(["photo.png", "image"]),
            ),
            json!({"id": 2, "type": "ImageScale", "mode": 4,
                   "inputs": [inp("mask", "MASK", Some(2)), inp("image", "IMAGE", Some(1))],
                   "outputs": [out("IMAGE", &[3])], "properties": {}, "widgets_values": ["area", 64]}),
            json!({"id": 3, "type": "Blend", "mode": 4, "inputs": [inp("image1", "IMAGE", None)],
                   "outputs": [out("IMAGE", &[4])], "properties": {}, "widgets_values": []}),
            node(
                4,
                "Blend",
                json!([
                    inp("image1", "IMAGE", Some(3)),
                    inp("image2", "IMAGE", Some(4))
                ]),
                json!([out("IMAGE", &[5])]),
                json!([]),
            ),
            node(
                5,
                "SaveImage",
                json!([inp("images", "IMAGE", Some(5))]),
                json!([]),
                json!(["x"]),
            ),
        ],
        json!([
            [1, 1, 0, 2, 1, "IMAGE"],
            [2, 1, 1, 2, 0, "MASK"],
            [3, 2, 0, 4, 0, "IMAGE"],
            [4, 3, 0, 4, 1, "IMAGE"],
            [5, 4, 0, 5, 0, "IMAGE"]
        ]),
    );
    let p = prompt(&ui);
    // The saved input order puts `mask` first: slot 0 is MASK, not compatible with IMAGE, so
    // the first input of exactly type IMAGE is taken.
    assert_eq!(inputs(&p, "4"), json!({"image1": ["1", 0]}));
    assert!(p.get("2").is_none() && p.get("3").is_none());
}

#[test]
fn chains_of_bypassed_nodes_and_reroutes_pass_links_through() {
    let ui = ui(
        vec![
            node(
                1,
                "CheckpointLoaderSimple",
                json!([]),
                json!([out("MODEL", &[1]), out("CLIP", &[2]), out("VAE", &[])]),
                json!(["sd15.safetensors"]),
            ),
            json!({"id": 2, "type": "LoraLoader", "mode": 4, "inputs": [inp("model", "MODEL", Some(1)), inp("clip", "CLIP", Some(2))],
                   "outputs": [out("MODEL", &[3]), out("CLIP", &[4])], "properties": {}, "widgets_values": ["detail.safetensors", 1, 1]}),
            json!({"id": 3, "type": "LoraLoader", "mode": 4, "inputs": [inp("model", "MODEL", Some(3)), inp("clip", "CLIP", Some(4))],
                   "outputs": [out("MODEL", &[5]), out("CLIP", &[6])], "properties": {}, "widgets_values": ["detail.safetensors", 1, 1]}),
            node(
                10,
                "Reroute",
                json!([inp("", "*", Some(6))]),
                json!([out("CLIP", &[7])]),
                json!(null),
            ),
            node(
                11,
                "Reroute",
                json!([inp("", "*", Some(7))]),
                json!([out("CLIP", &[8])]),
                json!(null),
            ),
            node(
                4,
                "CLIPTextEncode",
                json!([inp("clip", "CLIP", Some(8))]),
                json!([out("CONDITIONING", &[])]),
                json!(["cat"]),
            ),
            node(
                5,
                "KSampler",
                json!([inp("model", "MODEL", Some(5))]),
                json!([out("LATENT", &[])]),
                json!([1, "fixed", 20, 8, "euler", "normal", 1]),
            ),
        ],
        json!([
            [1, 1, 0, 2, 0, "MODEL"],
            [2, 1, 1, 2, 1, "CLIP"],
            [3, 2, 0, 3, 0, "MODEL"],
            [4, 2, 1, 3, 1, "CLIP"],
            [5, 3, 0, 5, 0, "MODEL"],
            [6, 3, 1, 10, 0, "*"],
            [7, 10, 0, 11, 0, "*"],
            [8, 11, 0, 4, 0, "CLIP"]
        ]),
    );
    let p = prompt(&ui);
    assert_eq!(inputs(&p, "4")["clip"], json!(["1", 1]));
    assert_eq!(inputs(&p, "5")["model"], json!(["1", 0]));
    assert_eq!(p.as_object().unwrap().len(), 3);
}

#[test]
fn primitive_node_value_fans_out_and_wins_over_saved_values() {
    let ui = ui(
        vec![
            json!({"id": 9, "type": "PrimitiveNode", "mode": 0, "inputs": [],
                   "outputs": [{"name": "INT", "type": "INT", "widget": {"name": "width"}, "links": [1, 2]}],
                   "properties": {"Run widget replace on values": false}, "widgets_values": [768, "fixed"]}),
            node(
                1,
                "EmptyLatentImage",
                json!([{"name": "width", "type": "INT", "widget": {"name": "width"}, "link": 1}]),
                json!([out("LATENT", &[])]),
                json!([512, 512, 1]),
            ),
            node(
                2,
                "EmptyLatentImage",
                json!([{"name": "width", "type": "INT", "widget": {"name": "width"}, "link": 2}]),
                json!([out("LATENT", &[])]),
                json!([640, 256, 2]),
            ),
        ],
        json!([[1, 9, 0, 1, 0, "INT"], [2, 9, 0, 2, 0, "INT"]]),
    );
    let p = prompt(&ui);
    assert_eq!(
        inputs(&p, "1"),
        json!({"width": 768, "height": 512, "batch_size": 1})
    );
    assert_eq!(
        inputs(&p, "2"),
        json!({"width": 768, "height": 256, "batch_size": 2})
    );
    assert!(p.get("9").is_none());
}

/// A root-level instance of a one-node subgraph (EmptyLatentImage) whose `width` and `height`
/// are promoted; `height` may be linked outside.
fn promoted_example(instance_inputs: Value, properties: Value, widgets: Value) -> Value {
    let def = json!({
        "id": "11111111-2222-3333-4444-555555555555", "name": "Latent", "version": 1,
        "state": {"lastNodeId": 2, "lastLinkId": 3},
        "inputNode": {"id": -10, "bounding": [0, 0, 1, 1]}, "outputNode": {"id": -20, "bounding": [0, 0, 1, 1]},
        "inputs": [{"id": "a", "name": "width", "type": "INT", "linkIds": [1]},
                   {"id": "b", "name": "height", "type": "INT", "linkIds": [2]}],
        "outputs": [{"id": "c", "name": "LATENT", "type": "LATENT", "linkIds": [3]}],
        "widgets": [],
        "nodes": [{"id": 1, "type": "EmptyLatentImage", "mode": 0,
                   "inputs": [{"name": "width", "type": "INT", "widget": {"name": "width"}, "link": 1},
                              {"name": "height", "type": "INT", "widget": {"name": "height"}, "link": 2}],
                   "outputs": [{"name": "LATENT", "type": "LATENT", "links": [3]}], "properties": {}, "widgets_values": [512, 512, 1]}],
        "links": [{"id": 1, "origin_id": -10, "origin_slot": 0, "target_id": 1, "target_slot": 0, "type": "INT"},
                  {"id": 2, "origin_id": -10, "origin_slot": 1, "target_id": 1, "target_slot": 1, "type": "INT"},
                  {"id": 3, "origin_id": 1, "origin_slot": 0, "target_id": -20, "target_slot": 0, "type": "LATENT"}]
    });
    json!({
        "last_node_id": 10, "last_link_id": 10, "version": 0.4,
        "nodes": [
            {"id": 7, "type": "EmptyLatentImage", "mode": 0, "inputs": [], "outputs": [{"name": "LATENT", "type": "LATENT", "links": []}],
             "properties": {}, "widgets_values": [300, 200, 1]},
            {"id": 8, "type": "Forced", "mode": 0, "inputs": [], "outputs": [{"name": "INT", "type": "INT", "links": [5]}],
             "properties": {}, "widgets_values": [1, 3]},
            {"id": 5, "type": "11111111-2222-3333-4444-555555555555", "mode": 0, "inputs": instance_inputs,
             "outputs": [{"name": "LATENT", "type": "LATENT", "links": [6]}], "properties": properties, "widgets_values": widgets},
            {"id": 6, "type": "VAEDecode", "mode": 0, "inputs": [{"name": "samples", "type": "LATENT", "link": 6}],
             "outputs": [{"name": "IMAGE", "type": "IMAGE", "links": []}], "properties": {}, "widgets_values": []}
        ],
        "links": [[5, 8, 0, 5, 1, "INT"], [6, 5, 0, 6, 0, "LATENT"]],
        "definitions": {"subgraphs": [def]}
    })
}

#[test]
fn promoted_widgets_take_the_instance_value_unless_linked_outside() {
    // Positional instance values, height unlinked.
    let p = prompt(&promoted_example(json!([]), json!({}), json!([1024, 768])));
    assert_eq!(
        inputs(&p, "5:1"),
        json!({"width": 1024, "height": 768, "batch_size": 1})
    );
    assert_eq!(inputs(&p, "6")["samples"], json!(["5:1", 0]));
    // proxyWidgets order, and a partial saved input list with `height` linked outside.
    let p = prompt(&promoted_example(
        json!([{"name": "height", "type": "INT", "widget": {"name": "height"}, "link": 5}]),
        json!({"proxyWidgets": [["-1", "height"], ["-1", "width"]]}),
        json!([111, 1024]),
    ));
    assert_eq!(inputs(&p, "5:1")["width"], json!(1024));
    assert_eq!(inputs(&p, "5:1")["height"], json!(["8", 0]));
    // No instance value saved: the inner widget's own value.
    let p = prompt(&promoted_example(json!([]), json!({}), json!([])));
    assert_eq!(inputs(&p, "5:1")["width"], json!(512));
}

#[test]
fn nested_subgraphs_pass_inputs_and_outputs_through() {
    // Outer definition O holds an instance of inner definition I; I's output is wired straight
    // from its input (-10 → -20), and O forwards its input to I.
    let inner = json!({
        "id": "aaaaaaaa-0000-0000-0000-000000000001", "name": "I", "version": 1, "state": {"lastNodeId": 1},
        "inputNode": {"id": -10}, "outputNode": {"id": -20},
        "inputs": [{"id": "x", "name": "model", "type": "MODEL", "linkIds": [1]}],
        "outputs": [{"id": "y", "name": "MODEL", "type": "MODEL", "linkIds": [1]}],
        "nodes": [], "links": [{"id": 1, "origin_id": -10, "origin_slot": 0, "target_id": -20, "target_slot": 0, "type": "MODEL"}]
    });
    let outer = json!({
        "id": "aaaaaaaa-0000-0000-0000-000000000002", "name": "O", "version": 1, "state": {"lastNodeId": 3},
        "inputNode": {"id": -10}, "outputNode": {"id": -20},
        "inputs": [{"id": "x", "name": "model", "type": "MODEL", "linkIds": [1]}],
        "outputs": [],
        "nodes": [
            {"id": 2, "type": "aaaaaaaa-0000-0000-0000-000000000001", "mode": 0, "inputs": [{"name": "model", "type": "MODEL", "link": 1}],
             "outputs": [{"name": "MODEL", "type": "MODEL", "links": [2]}], "properties": {}, "widgets_values": []},
            {"id": 3, "type": "KSampler", "mode": 0, "inputs": [{"name": "model", "type": "MODEL", "link": 2}],
             "outputs": [{"name": "LATENT", "type": "LATENT", "links": []}], "properties": {}, "widgets_values": [5, "fixed", 20, 8, "euler", "normal", 1]}
        ],
        "links": [{"id": 1, "origin_id": -10, "origin_slot": 0, "target_id": 2, "target_slot": 0, "type": "MODEL"},
                  {"id": 2, "origin_id": 2, "origin_slot": 0, "target_id": 3, "target_slot": 0, "type": "MODEL"}]
    });
    let doc = json!({
        "last_node_id": 10, "last_link_id": 10, "version": 0.4,
        "nodes": [
            node(1, "CheckpointLoaderSimple", json!([]), json!([out("MODEL", &[1]), out("CLIP", &[]), out("VAE", &[])]), json!(["sd15.safetensors"])),
            {"id": 9, "type": "aaaaaaaa-0000-0000-0000-000000000002", "mode": 0, "inputs": [{"name": "model", "type": "MODEL", "link": 1}],
             "outputs": [], "properties": {}, "widgets_values": []}
        ],
        "links": [[1, 1, 0, 9, 0, "MODEL"]],
        "definitions": {"subgraphs": [inner, outer]}
    });
    let p = prompt(&doc);
    assert_eq!(inputs(&p, "9:3")["model"], json!(["1", 0]));
    assert_eq!(p.as_object().unwrap().len(), 2);
}

#[test]
fn muted_node_feeding_an_optional_input_drops_the_input() {
    let ui = ui(
        vec![
            node(
                1,
                "LoadImage",
                json!([]),
                json!([out("IMAGE", &[1]), out("MASK", &[])]),
                json!(["photo.png", "image"]),
            ),
            json!({"id": 2, "type": "LoadImage", "mode": 2, "inputs": [], "outputs": [out("IMAGE", &[2]), out("MASK", &[])],
                   "properties": {}, "widgets_values": ["b.png", "image"]}),
            node(
                3,
                "Blend",
                json!([
                    inp("image1", "IMAGE", Some(1)),
                    inp("image2", "IMAGE", Some(2))
                ]),
                json!([out("IMAGE", &[])]),
                json!([]),
            ),
        ],
        json!([[1, 1, 0, 3, 0, "IMAGE"], [2, 2, 0, 3, 1, "IMAGE"]]),
    );
    let p = prompt(&ui);
    assert_eq!(inputs(&p, "3"), json!({"image1": ["1", 0]}));
    assert!(p.get("2").is_none());
}

/// The frontend assigns `widgets_values` to its widgets by position, and the seed's
/// `control_after_generate` widget takes the slot after the seed whatever it holds: a mode
/// string, the boolean older saves hold, or — in a save without the slot — the next value.
#[test]
fn seed_control_slot_is_consumed_by_position_whatever_its_value() {
    let ksampler = |values: Value| {
        ui(
            vec![node(1, "KSampler", json!([]), json!([]), values)],
            json!([]),
        )
    };
    let want = json!({"seed": 42, "steps": 30, "cfg": 6.5, "sampler_name": "dpmpp_2m", "scheduler": "karras", "denoise": 0.5});
    for control in [json!("randomize"), json!(true), json!(false)] {
        let with = ksampler(json!([42, control, 30, 6.5, "dpmpp_2m", "karras", 0.5]));
        assert_eq!(inputs(&prompt(&with), "1"), want, "control {control}");
    }
    // Without the slot the values shift, as in the frontend (the server then rejects them,
    // and `validate` says which).
    let without = ksampler(json!([42, 30, 6.5, "dpmpp_2m", "karras", 0.5]));
    assert_eq!(
        inputs(&prompt(&without), "1"),
        json!({"seed": 42, "steps": 6.5, "cfg": "dpmpp_2m", "sampler_name": "karras", "scheduler": 0.5, "denoise": 1.0})
    );
    // An INT named noise_seed gets a control slot even without the flag.
    let noise = ui(
        vec![node(
            2,
            "RandomNoise",
            json!([]),
            json!([]),
            json!([7, "fixed"]),
        )],
        json!([]),
    );
    assert_eq!(inputs(&prompt(&noise), "2"), json!({"noise_seed": 7}));
}

#[test]
fn upload_slot_dict_values_arrays_and_legacy_forced_slots() {
    let ui = ui(
        vec![
            node(
                1,
                "LoadImage",
                json!([]),
                json!([out("IMAGE", &[]), out("MASK", &[])]),
                json!(["cat.png [input]", "image"]),
            ),
            node(
                2,
                "PackNode",
                json!([]),
                json!([]),
                json!({"format": "video/h264-mp4", "frame_rate": 24, "videopreview": {"hidden": false}}),
            ),
            node(
                3,
                "ListNode",
                json!([]),
                json!([]),
                json!([["#fff", "#000"]]),
            ),
            node(4, "Forced", json!([]), json!([]), json!([10, 99, 30])),
            node(5, "Forced", json!([]), json!([]), json!([10, 30])),
        ],
        json!([]),
    );
    let p = prompt(&ui);
    assert_eq!(inputs(&p, "1"), json!({"image": "cat.png [input]"}));
    assert_eq!(
        inputs(&p, "2"),
        json!({"frame_rate": 24, "format": "video/h264-mp4"})
    );
    assert_eq!(
        inputs(&p, "3"),
        json!({"colors": {"__value__": ["#fff", "#000"]}})
    );
    assert_eq!(inputs(&p, "4"), json!({"a": 10, "c": 30}));
    assert_eq!(inputs(&p, "5"), json!({"a": 10, "c": 30}));
}

#[test]
fn object_links_stale_links_and_dynamic_prompts() {
    let mut doc = ui(
        vec![
            node(
                1,
                "CheckpointLoaderSimple",
                json!([]),
                json!([out("MODEL", &[]), out("CLIP", &[1]), out("VAE", &[])]),
                json!(["sd15.safetensors"]),
            ),
            node(
                2,
                "CLIPTextEncode",
                json!([inp("clip", "CLIP", Some(1))]),
                json!([out("CONDITIONING", &[])]),
                json!(["see https://x\n{red|blue}"]),
            ),
            node(
                3,
                "CLIPTextEncode",
                json!([inp("clip", "CLIP", Some(77))]),
                json!([out("CONDITIONING", &[])]),
                json!(["b"]),
            ),
        ],
        json!([{"id": 1, "origin_id": 1, "origin_slot": 1, "target_id": 2, "target_slot": 0, "type": "CLIP"},
               {"id": 1, "origin_id": 1, "origin_slot": 1, "target_id": 2, "target_slot": 0, "type": "CLIP"}]),
    );
    let c = convert(&doc, &defs()).unwrap();
    let p = c.workflow.to_value();
    assert_eq!(
        p["2"]["inputs"],
        json!({"text": "see https:\nred", "clip": ["1", 1]})
    );
    assert_eq!(p["3"]["inputs"], json!({"text": "b"}));
    assert!(
        c.warnings.iter().any(|w| w.contains("link 77")),
        "{:?}",
        c.warnings
    );
    // A link whose target is another node is dropped from the input, as the frontend's repair does.
    let mut wrong = doc.clone();
    wrong["nodes"][2]["inputs"][0]["link"] = json!(1);
    let c = convert(&wrong, &defs()).unwrap();
    assert_eq!(c.workflow.to_value()["3"]["inputs"], json!({"text": "b"}));
    assert!(
        c.warnings.iter().any(|w| w.contains("goes to node 2")),
        "{:?}",
        c.warnings
    );
    assert!(
        c.warnings.iter().any(|w| w.contains("random")),
        "{:?}",
        c.warnings
    );
    // Everything muted: nothing to run.
    for n in doc["nodes"].as_array_mut().unwrap() {
        n["mode"] = json!(2);
    }
    assert!(matches!(convert(&doc, &defs()), Err(UiError::Empty)));
}

#[test]
fn unknown_types_are_listed_with_title_and_pack() {
    let doc = ui(
        vec![
            json!({"id": 4, "type": "FancySampler", "mode": 0, "title": "My sampler", "inputs": [], "outputs": [],
                   "properties": {"cnr_id": "fancy-pack", "ver": "1.2.3"}, "widgets_values": []}),
            json!({"id": 5, "type": "OtherThing", "mode": 0, "inputs": [], "outputs": [], "properties": {}, "widgets_values": []}),
            json!({"id": 6, "type": "Bypassed", "mode": 4, "inputs": [], "outputs": [], "properties": {}, "widgets_values": []}),
            node(
                7,
                "LoadImage",
                json!([]),
                json!([]),
                json!(["a.png", "image"]),
            ),
        ],
        json!([]),
    );
    let err = convert(&doc, &defs()).unwrap_err();
    let UiError::UnknownTypes(list) = &err else {
        panic!("{err}")
    };
    assert_eq!(list.len(), 2);
    let text = err.to_string();
    assert!(
        text.contains("node 4 type 'FancySampler' (title \"My sampler\")"),
        "{text}"
    );
    assert!(text.contains("fancy-pack@1.2.3"), "{text}");
    assert!(text.contains("node 5 type 'OtherThing'"), "{text}");
}

#[test]
fn colliding_inner_ids_are_renumbered_after_the_last_id() {
    let mut doc = promoted_example(json!([]), json!({}), json!([1024, 768]));
    // Root node 7 exists; give the inner node id 7 too.
    let sg = &mut doc["definitions"]["subgraphs"][0];
    sg["nodes"][0]["id"] = json!(7);
    for l in sg["links"].as_array_mut().unwrap() {
        for k in ["origin_id", "target_id"] {
            if l[k] == json!(1) {
                l[k] = json!(7);
            }
        }
    }
    let p = prompt(&doc);
    assert!(p.get("5:11").is_some(), "{p}");
    assert_eq!(inputs(&p, "6")["samples"], json!(["5:11", 0]));
}

#[test]
fn written_back_variant_converts_to_the_api_variant() {
    let original = worked_example();
    let defs = defs();
    let converted = convert(&original, &defs).unwrap();
    let edits = vec![
        // The seed comes from the PrimitiveNode: its value changes.
        Edit::SetInput {
            node: "3".into(),
            input: "seed".into(),
            value: json!(99),
        },
        Edit::SetInput {
            node: "3".into(),
            input: "steps".into(),
            value: json!(4),
        },
        Edit::SetInput {
            node: "5".into(),
            input: "width".into(),
            value: json!(256),
        },
        // The promoted filename_prefix lives on the instance.
        Edit::SetInput {
            node: "20:2".into(),
            input: "filename_prefix".into(),
            value: json!("small"),
        },
        Edit::Bypass { node: "7".into() },
    ];
    let mut want = converted.workflow.clone();
    want.apply(&edits, &defs).unwrap();
    let written = write_variant(&original, &converted, &edits, &defs).unwrap();
    let back = convert(&written, &defs).unwrap();
    assert_eq!(back.workflow.sha256(), want.sha256());
    let node = |id: i64| {
        written["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"] == json!(id))
            .unwrap()
            .clone()
    };
    assert_eq!(node(10)["widgets_values"][0], json!(99));
    assert_eq!(node(3)["widgets_values"][2], json!(4));
    assert_eq!(node(5)["widgets_values"][0], json!(256));
    assert_eq!(node(20)["widgets_values"][0], json!("small"));
    assert_eq!(node(7)["mode"], json!(4));
    assert_eq!(
        node(12)["widgets_values"],
        original["nodes"][8]["widgets_values"]
    );
    // Removing a branch mutes its nodes.
    let edits = vec![Edit::Remove {
        nodes: vec!["20:1".into(), "20:2".into()],
    }];
    let written = write_variant(&original, &converted, &edits, &defs).unwrap();
    let mut want = converted.workflow.clone();
    want.apply(&edits, &defs).unwrap();
    assert_eq!(
        convert(&written, &defs).unwrap().workflow.sha256(),
        want.sha256()
    );
    assert_eq!(
        written["definitions"]["subgraphs"][0]["nodes"][0]["mode"],
        json!(2)
    );
}

#[test]
fn convert_command_writes_the_api_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let ui_path = dir.path().join("wf.json");
    std::fs::write(&ui_path, serde_json::to_string(&worked_example()).unwrap()).unwrap();
    let defs_path = dir.path().join("object_info.json");
    let defs_json: Value =
        serde_json::from_str(include_str!("../fixtures/ui_object_info.json")).unwrap();
    std::fs::write(&defs_path, defs_json.to_string()).unwrap();
    let out_path = dir.path().join("api.json");
    let where_path = dir.path().join("where.json");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "convert",
            ui_path.to_str().unwrap(),
            "--object-info",
            defs_path.to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
        ])
        .args(["--provenance", where_path.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let origins: Value =
        serde_json::from_str(&std::fs::read_to_string(&where_path).unwrap()).unwrap();
    assert_eq!(origins["20:2"]["scope"], json!(["20"]));
    assert_eq!(origins["6"]["title"], json!("Positive"));
    let api: Value = serde_json::from_str(&std::fs::read_to_string(&out_path).unwrap()).unwrap();
    assert_eq!(api["20:2"]["inputs"]["filename_prefix"], json!("fox"));
    // validate takes the UI file directly.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "validate",
            ui_path.to_str().unwrap(),
            "--object-info",
            defs_path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("valid"), "{text}");
    // A UI file with a node type the server does not know: exit 1, the node named.
    let mut unknown = worked_example();
    unknown["nodes"][0]["type"] = json!("MysteryLoader");
    std::fs::write(&ui_path, unknown.to_string()).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args([
            "convert",
            ui_path.to_str().unwrap(),
            "--object-info",
            defs_path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(err.contains("node 4 type 'MysteryLoader'"), "{err}");
}

#[test]
fn convert_of_a_subgraph_that_contains_itself_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = worked_example();
    let sg = &mut doc["definitions"]["subgraphs"][0];
    let id = sg["id"].clone();
    sg["nodes"].as_array_mut().unwrap().push(json!({
        "id": 99, "type": id, "mode": 0, "inputs": [], "outputs": [],
        "properties": {}, "widgets_values": []
    }));
    let ui_path = dir.path().join("wf.json");
    std::fs::write(&ui_path, doc.to_string()).unwrap();
    let defs_path = dir.path().join("object_info.json");
    std::fs::write(&defs_path, include_str!("../fixtures/ui_object_info.json")).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_comfy-bisect"))
        .args(["convert", ui_path.to_str().unwrap(), "--object-info"])
        .arg(&defs_path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "bad input: {err}");
    assert!(
        err.contains("subgraphs nest deeper than 64 levels"),
        "{err}"
    );
}

#[test]
fn relink_and_disconnect_are_written_back() {
    let original = worked_example();
    let defs = defs();
    let converted = convert(&original, &defs).unwrap();
    // Point KSampler's negative at the positive prompt, and disconnect its latent (a required
    // input: the variant is invalid, but it must still round-trip).
    let edits = vec![
        Edit::Relink {
            node: "3".into(),
            input: "negative".into(),
            source: "6".into(),
            slot: 0,
        },
        Edit::Disconnect {
            node: "3".into(),
            input: "latent_image".into(),
        },
    ];
    let mut want = converted.workflow.clone();
    want.apply(&edits, &defs).unwrap();
    let written = write_variant(&original, &converted, &edits, &defs).unwrap();
    assert_eq!(
        convert(&written, &defs).unwrap().workflow.sha256(),
        want.sha256()
    );
    // One link replaced, one removed.
    assert_eq!(
        written["links"].as_array().unwrap().len(),
        original["links"].as_array().unwrap().len() - 1
    );
    // A relink across a subgraph boundary has no UI equivalent here.
    let edits = vec![Edit::Relink {
        node: "20:1".into(),
        input: "samples".into(),
        source: "5".into(),
        slot: 0,
    }];
    let err = write_variant(&original, &converted, &edits, &defs).unwrap_err();
    assert!(err.to_string().contains("different graphs"), "{err}");
}
