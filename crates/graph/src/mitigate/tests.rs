//! The catalogue against the captured `/object_info` of ComfyUI 0.3.64 and the custom-node
//! fixture: which controls apply to which failure, in which order, and what they edit.

use super::*;
use crate::workflow::Workflow;
use serde_json::json;
use std::path::Path;

fn defs() -> NodeDefs {
    NodeDefs::load_files(&[
        Path::new(&format!(
            "{}/comfyui/GET__object_info.final.json",
            crate::FIXTURES
        ))
        .to_path_buf(),
        Path::new(&format!(
            "{}/custom-nodes/object_info.custom.json",
            crate::FIXTURES
        ))
        .to_path_buf(),
    ])
    .unwrap()
}

/// SD-style text-to-image with a UNET loader, a dual CLIP loader and a batch of 2.
fn txt2img() -> Workflow {
    Workflow::from_json_str(
        &json!({
            "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-dev.safetensors", "weight_dtype": "default"}},
            "2": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors", "clip_name2": "t5xxl_fp16.safetensors", "type": "flux"}},
            "3": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
            "4": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["2", 0]}},
            "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 2}},
            "6": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "positive": ["4", 0], "negative": ["4", 0], "latent_image": ["5", 0],
                  "seed": 1, "steps": 20, "cfg": 1.0, "sampler_name": "euler", "scheduler": "simple", "denoise": 1.0}},
            "7": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["3", 0]}},
            "8": {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": "out"}}
        })
        .to_string(),
        "txt2img.json",
    )
    .unwrap()
}

fn planned(stage: &str, server: &ServerFacts) -> Vec<Planned> {
    plan(
        &catalogue(),
        &txt2img(),
        &defs(),
        &Catalog::builtin(),
        stage,
        server,
    )
}

fn ids(plans: &[Planned]) -> Vec<&str> {
    plans
        .iter()
        .filter(|p| p.applies())
        .map(|p| p.control.id.as_str())
        .collect()
}

#[test]
fn the_catalogue_is_valid_and_every_control_is_one_kind_of_change() {
    let controls = catalogue();
    assert!(controls.len() >= 10);
    let mut seen = std::collections::BTreeSet::new();
    for c in &controls {
        assert!(seen.insert(c.id.clone()), "duplicate id {}", c.id);
        assert!(!c.place.is_empty(), "{} targets no stage", c.id);
        assert!(!c.change.is_empty() && !c.predicts.is_empty(), "{}", c.id);
        match c.kind {
            Kind::Graph => assert!(
                !c.edits.is_empty() && c.args.is_empty() && c.env.is_empty(),
                "{}",
                c.id
            ),
            Kind::Server => assert!(
                c.edits.is_empty() && (!c.args.is_empty() || !c.env.is_empty()),
                "{}",
                c.id
            ),
        }
        for stage in c.place.keys() {
            assert!(
                [
                    "load",
                    "condition",
                    "sample_first",
                    "sample_middle",
                    "decode",
                    "postprocess"
                ]
                .contains(&stage.as_str()),
                "{}: unknown stage {stage}",
                c.id
            );
        }
    }
}

#[test]
fn a_decode_failure_tries_tiled_decode_first_with_the_spatial_tiles() {
    let plans = planned("decode", &ServerFacts::default());
    let tried = ids(&plans);
    assert_eq!(tried[0], "tiled-decode");
    // Sampling-only controls are not tried at decode.
    assert!(!tried.contains(&"fp8-weights"));
    assert!(!tried.contains(&"caches-off"));
    // No frame count in the graph: the temporal variant does not apply.
    assert!(!tried.contains(&"tiled-decode-temporal"));
    let Fit::Graph {
        workflow, changes, ..
    } = &plans[0].fit
    else {
        panic!("tiled decode is a graph control")
    };
    let node = workflow.node("7").unwrap();
    assert_eq!(node.class_type, "VAEDecodeTiled");
    assert_eq!(node.inputs["tile_size"].as_literal(), Some(&json!(256)));
    assert_eq!(node.inputs["samples"].as_link().unwrap().node, "6");
    assert_eq!(changes[0].action, "class");
    // The rest of the graph is untouched.
    assert_eq!(workflow.nodes.len(), 8);
    assert_eq!(workflow.node("5"), txt2img().node("5"));
}

#[test]
fn a_sampling_failure_does_not_try_decode_controls_and_says_why() {
    let plans = planned("sample_middle", &ServerFacts::default());
    let tried = ids(&plans);
    assert_eq!(tried[0], "batch-1");
    assert!(tried.contains(&"fp8-weights"));
    let tiled = plans
        .iter()
        .find(|p| p.control.id == "tiled-decode")
        .unwrap();
    assert_eq!(
        tiled.fit,
        Fit::NotApplicable("targets decode, the failure is at sample_middle".into())
    );
    // first before indirect before depends; graph before server within a place.
    let places: Vec<Place> = plans
        .iter()
        .filter(|p| p.applies())
        .map(|p| p.place.unwrap())
        .collect();
    let mut sorted = places.clone();
    sorted.sort();
    assert_eq!(places, sorted);
}

#[test]
fn fp8_is_set_only_where_the_loader_offers_it_and_only_from_default() {
    let plans = planned("load", &ServerFacts::default());
    let fp8 = plans
        .iter()
        .find(|p| p.control.id == "fp8-weights")
        .unwrap();
    let Fit::Graph { changes, .. } = &fp8.fit else {
        panic!("fp8 applies to UNETLoader")
    };
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].to, Some(json!("fp8_e4m3fn")));
    // Already fp8: nothing to change.
    let mut w = txt2img();
    w.apply(
        &[Edit::SetInput {
            node: "1".into(),
            input: "weight_dtype".into(),
            value: json!("fp8_e5m2"),
        }],
        &defs(),
    )
    .unwrap();
    let c = catalogue();
    let fp8 = c.iter().find(|c| c.id == "fp8-weights").unwrap();
    assert!(graph_edits(fp8, &w, &defs(), &Catalog::builtin()).is_empty());
}

#[test]
fn the_text_encoder_goes_to_the_cpu_through_its_device_option() {
    let plans = planned("condition", &ServerFacts::default());
    assert_eq!(ids(&plans)[0], "text-encoder-cpu");
    let Fit::Graph { workflow, .. } = &plans[0].fit else {
        panic!()
    };
    assert_eq!(
        workflow.node("2").unwrap().inputs["device"].as_literal(),
        Some(&json!("cpu"))
    );
}

#[test]
fn server_controls_follow_the_servers_memory_mode_and_flags() {
    let plain = planned("sample_middle", &ServerFacts::default());
    let headroom = plain
        .iter()
        .find(|p| p.control.id == "vram-headroom")
        .unwrap();
    assert!(!headroom.applies(), "no dynamic VRAM: no headroom control");
    let dynamic = planned(
        "sample_middle",
        &ServerFacts {
            dynamic_vram: true,
            argv: vec!["main.py".into(), "--reserve-vram".into(), "2".into()],
        },
    );
    let find = |id: &str| dynamic.iter().find(|p| p.control.id == id).unwrap();
    assert_eq!(find("vram-headroom").fit, Fit::Server);
    assert_eq!(
        find("reserve-vram").fit,
        Fit::NotApplicable("the server already runs with --reserve-vram 2".into())
    );
}

#[test]
fn a_batch_of_one_and_a_graph_without_video_leave_their_controls_out() {
    let mut w = txt2img();
    w.apply(
        &[Edit::SetInput {
            node: "5".into(),
            input: "batch_size".into(),
            value: json!(1),
        }],
        &defs(),
    )
    .unwrap();
    let plans = plan(
        &catalogue(),
        &w,
        &defs(),
        &Catalog::builtin(),
        "sample_first",
        &ServerFacts::default(),
    );
    let batch = plans.iter().find(|p| p.control.id == "batch-1").unwrap();
    assert_eq!(
        batch.fit,
        Fit::NotApplicable("no node of the workflow offers this change".into())
    );
}

#[test]
fn the_wrapper_decoder_turns_its_own_tiling_on() {
    let w = Workflow::from_json_str(
        &json!({
            "1": {"class_type": "WanVideoVAELoader", "inputs": {"model_name": "wan_2.1_vae.safetensors", "precision": "bf16"}},
            "2": {"class_type": "WanVideoEmptyEmbeds", "inputs": {"width": 832, "height": 480, "num_frames": 81}},
            "3": {"class_type": "WanVideoDecode", "inputs": {"vae": ["1", 0], "samples": ["2", 0], "enable_vae_tiling": false,
                  "tile_x": 272, "tile_y": 272, "tile_stride_x": 144, "tile_stride_y": 128}}
        })
        .to_string(),
        "wan.json",
    )
    .unwrap();
    let plans = plan(
        &catalogue(),
        &w,
        &defs(),
        &Catalog::builtin(),
        "decode",
        &ServerFacts::default(),
    );
    assert_eq!(ids(&plans)[0], "tiled-decode");
    let Fit::Graph { changes, .. } = &plans[0].fit else {
        panic!()
    };
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].input.as_deref(), Some("enable_vae_tiling"));
}

#[test]
fn the_tiled_upscaler_gets_smaller_tiles_only_where_they_are_larger() {
    let w = Workflow::from_json_str(
        &json!({
            "1": {"class_type": "EmptyImage", "inputs": {"width": 512, "height": 512, "batch_size": 1, "color": 0}},
            "2": {"class_type": "UltimateSDUpscaleNoUpscale", "inputs": {"upscaled_image": ["1", 0], "tile_width": 1024, "tile_height": 512,
                  "tiled_decode": false}}
        })
        .to_string(),
        "usdu.json",
    )
    .unwrap();
    let c = catalogue();
    let usdu = c.iter().find(|c| c.id == "upscaler-tiles").unwrap();
    let edits = graph_edits(usdu, &w, &defs(), &Catalog::builtin());
    let inputs: Vec<&str> = edits
        .iter()
        .map(|e| match e {
            Edit::SetInput { input, .. } => input.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(inputs, ["tile_width", "tiled_decode"]);
}

#[test]
fn previews_off_applies_only_to_a_server_that_sends_previews() {
    let facts = |argv: &[&str]| ServerFacts {
        dynamic_vram: false,
        argv: argv.iter().map(|s| s.to_string()).collect(),
    };
    let find = |argv: &[&str]| {
        planned("sample_middle", &facts(argv))
            .into_iter()
            .find(|p| p.control.id == "previews-off")
            .unwrap()
    };
    assert!(!find(&["main.py"]).applies());
    assert!(!find(&["main.py", "--preview-method", "none"]).applies());
    assert_eq!(
        find(&["main.py", "--preview-method", "taesd"]).fit,
        Fit::Server
    );
    assert_eq!(find(&["main.py", "--preview-method=auto"]).fit, Fit::Server);
}
