//! Hashing library: digests, cache, parallel hashing, locating model files, model references.

#[cfg(unix)]
use comfy_bisect_core::hashing::ModelRef;
use comfy_bisect_core::hashing::{
    hash_components, hash_file, hash_file_with, hash_files, locate, model_references,
    ComponentHash, ComponentStatus, HashCache, HashOptions, Location,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Deterministic pseudo-random bytes (xorshift64).
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

fn option_grid() -> Vec<HashOptions> {
    let mut grid = Vec::new();
    for buffer_size in [1, 3, 64, 4096, 1 << 20] {
        for reader_thread in [false, true] {
            grid.push(HashOptions {
                buffer_size,
                reader_thread,
                jobs: 1,
            });
        }
    }
    grid.push(HashOptions::default());
    grid
}

/// FIPS 180-2 / NIST example vectors for SHA-256.
#[test]
fn published_sha256_vectors_with_every_read_size() {
    let vectors: [(Vec<u8>, &str); 4] = [
        (
            b"abc".to_vec(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ),
        (
            Vec::new(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
        (
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".to_vec(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
        ),
        (
            vec![b'a'; 1_000_000],
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (content, expected)) in vectors.iter().enumerate() {
        let path = dir.path().join(format!("v{i}.bin"));
        fs::write(&path, content).unwrap();
        for opts in option_grid() {
            // Tiny read sizes over a million bytes are slow in debug builds; 64 B is enough there.
            if content.len() > 100_000 && opts.buffer_size < 64 {
                continue;
            }
            let h = hash_file_with(&path, &opts).unwrap();
            assert_eq!(h.sha256, *expected, "vector {i} with {opts:?}");
            assert_eq!(h.autov2, expected[..10], "vector {i}");
            assert_eq!(h.size, content.len() as u64);
            assert_eq!(h.bytes_read, content.len() as u64);
            assert!(!h.cached);
        }
    }
}

/// A generated file checked against coreutils `sha256sum` and an in-memory one-shot digest.
#[test]
fn generated_file_matches_sha256sum_and_one_shot_digest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let content = pseudo_random((5 << 20) + 17, 42);
    fs::write(&path, &content).unwrap();

    let out = Command::new("sha256sum")
        .arg(&path)
        .output()
        .expect("sha256sum (GNU coreutils) is needed by this test");
    assert!(out.status.success());
    let sha256sum = String::from_utf8(out.stdout).unwrap();
    let expected = sha256sum.split_whitespace().next().unwrap().to_string();
    assert_eq!(expected, hex::encode(Sha256::digest(&content)));

    for opts in option_grid().into_iter().filter(|o| o.buffer_size >= 64) {
        let h = hash_file_with(&path, &opts).unwrap();
        assert_eq!(h.sha256, expected, "{opts:?}");
        assert_eq!(h.autov2, &expected[..10]);
    }
    assert_eq!(hash_file(&path).unwrap().size, content.len() as u64);
}

#[test]
fn cache_hit_reads_zero_bytes_and_survives_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lora.safetensors");
    fs::write(&file, pseudo_random(300_000, 7)).unwrap();
    let cache_path = dir.path().join("runs/.hash-cache.json");
    let files = vec![file.clone()];

    let mut cache = HashCache::open(&cache_path);
    let first = hash_files(&files, Some(&mut cache), &HashOptions::default());
    let first = first[0].as_ref().unwrap();
    assert_eq!(first.bytes_read, 300_000);
    assert!(!first.cached);
    cache.save().unwrap();

    let mut reloaded = HashCache::open(&cache_path);
    assert!(reloaded.warnings().is_empty());
    let second = hash_files(&files, Some(&mut reloaded), &HashOptions::default());
    let second = second[0].as_ref().unwrap();
    assert_eq!(second.bytes_read, 0);
    assert!(second.cached);
    assert_eq!(second.sha256, first.sha256);
    assert_eq!(second.autov2, first.autov2);
    assert_eq!(second.size, first.size);
}

fn hash_one(file: &Path, cache: &mut HashCache) -> comfy_bisect_core::hashing::FileHash {
    hash_files(&[file.to_path_buf()], Some(cache), &HashOptions::default())
        .remove(0)
        .unwrap()
}

#[test]
fn cache_is_invalidated_by_size_mtime_and_inode_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("vae.safetensors");
    fs::write(&file, b"version one").unwrap();
    let mut cache = HashCache::in_memory();
    let v1 = hash_one(&file, &mut cache);
    assert_eq!(v1.bytes_read, 11);
    assert_eq!(hash_one(&file, &mut cache).bytes_read, 0);

    // Size change.
    fs::write(&file, b"version one, longer").unwrap();
    let v2 = hash_one(&file, &mut cache);
    assert_eq!(v2.bytes_read, 19);
    assert_eq!(
        v2.sha256,
        hex::encode(Sha256::digest(b"version one, longer"))
    );

    // Same size, different content, different mtime.
    let mtime = fs::metadata(&file).unwrap().modified().unwrap();
    fs::write(&file, b"version TWO, longer").unwrap();
    let handle = fs::File::options().write(true).open(&file).unwrap();
    handle.set_modified(mtime + Duration::from_secs(5)).unwrap();
    drop(handle);
    let v3 = hash_one(&file, &mut cache);
    assert_eq!(v3.bytes_read, 19);
    assert_eq!(
        v3.sha256,
        hex::encode(Sha256::digest(b"version TWO, longer"))
    );

    // Same size and mtime, but a new inode (file replaced by rename).
    let mtime = fs::metadata(&file).unwrap().modified().unwrap();
    let replacement = dir.path().join("replacement.tmp");
    fs::write(&replacement, b"version 333, longer").unwrap();
    let handle = fs::File::options().write(true).open(&replacement).unwrap();
    handle.set_modified(mtime).unwrap();
    drop(handle);
    fs::rename(&replacement, &file).unwrap();
    let v4 = hash_one(&file, &mut cache);
    assert_eq!(v4.bytes_read, 19);
    assert_eq!(
        v4.sha256,
        hex::encode(Sha256::digest(b"version 333, longer"))
    );
    assert_eq!(hash_one(&file, &mut cache).bytes_read, 0);
}

#[test]
fn corrupt_cache_is_a_warning_and_gets_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.bin");
    fs::write(&file, b"abc").unwrap();
    let cache_path = dir.path().join(".hash-cache.json");
    fs::write(&cache_path, b"\x00\x01garbage").unwrap();
    let mut cache = HashCache::open(&cache_path);
    assert_eq!(cache.warnings().len(), 1, "{:?}", cache.warnings());
    assert!(cache.warnings()[0].contains(".hash-cache.json"));
    let h = hash_one(&file, &mut cache);
    assert_eq!(&h.sha256[..10], "ba7816bf8f");
    cache.save().unwrap();
    let reloaded = HashCache::open(&cache_path);
    assert!(reloaded.warnings().is_empty());
    assert_eq!(reloaded.len(), 1);
}

#[test]
fn parallel_hashing_equals_sequential_hashing() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [0usize, 1, 63, 64, 65, 4096, (1 << 20) + 3, 3 << 20];
    let mut files: Vec<PathBuf> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let p = dir.path().join(format!("f{i}.bin"));
            fs::write(&p, pseudo_random(n, i as u64 + 1)).unwrap();
            p
        })
        .collect();
    files.push(files[6].clone()); // the same file twice is read once
    files.push(dir.path().join("missing.bin"));

    let sequential = HashOptions {
        buffer_size: 4096,
        reader_thread: false,
        jobs: 1,
    };
    let parallel = HashOptions {
        jobs: 4,
        ..HashOptions::default()
    };
    let results = hash_files(&files, None, &parallel);
    assert_eq!(results.len(), files.len());
    for (i, file) in files.iter().enumerate().take(sizes.len()) {
        let expected = hash_file_with(file, &sequential).unwrap();
        let got = results[i].as_ref().unwrap();
        assert_eq!(got.path, *file);
        assert_eq!(got.sha256, expected.sha256, "{}", file.display());
        assert_eq!(got.size, sizes[i] as u64);
    }
    let duplicate = results[sizes.len()].as_ref().unwrap();
    assert_eq!(duplicate.sha256, results[6].as_ref().unwrap().sha256);
    assert_eq!(duplicate.bytes_read, 0);
    let total: u64 = results.iter().flatten().map(|h| h.bytes_read).sum();
    assert_eq!(total, sizes.iter().sum::<usize>() as u64);
    let missing = results.last().unwrap().as_ref().unwrap_err().to_string();
    assert!(missing.contains("missing.bin"), "{missing}");

    // One job with the overlapping reader thread gives the same digests.
    let overlapped = HashOptions {
        reader_thread: true,
        jobs: 1,
        buffer_size: 64 << 10,
    };
    let again = hash_files(&files[..sizes.len()], None, &overlapped);
    for (a, b) in again.iter().zip(&results) {
        assert_eq!(a.as_ref().unwrap().sha256, b.as_ref().unwrap().sha256);
    }
}

#[cfg(unix)]
fn model_ref(file: &str, folders: Vec<&'static str>) -> ModelRef {
    ModelRef {
        node_id: "1".into(),
        class_type: "LoraLoader".into(),
        input: "lora_name".into(),
        file: file.into(),
        folders,
    }
}

#[cfg(unix)]
fn unhashed_reason(location: Location) -> String {
    match location {
        Location::Unhashed { reason } => reason,
        Location::Located { path, .. } => panic!("unexpectedly located {}", path.display()),
    }
}

// Symbolic links on Windows need a privilege most accounts lack.
#[cfg(unix)]
#[test]
fn locate_refuses_escapes_and_follows_the_users_links_out_of_the_roots() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ComfyUI/models");
    fs::create_dir_all(root.join("loras/sd15")).unwrap();
    fs::write(root.join("loras/sd15/inside.safetensors"), b"inside").unwrap();
    let outside = dir.path().join("secret.safetensors");
    fs::write(&outside, b"secret").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("loras/link-out.safetensors")).unwrap();
    std::os::unix::fs::symlink(
        root.join("loras/sd15/inside.safetensors"),
        root.join("loras/link-in.safetensors"),
    )
    .unwrap();
    let roots = vec![root.clone()];

    for name in [
        "../../secret.safetensors",
        "sd15/../../../secret.safetensors",
    ] {
        let reason = unhashed_reason(locate(&model_ref(name, vec!["loras"]), &roots));
        assert!(reason.contains("'..'"), "{name}: {reason}");
    }
    let absolute = outside.to_str().unwrap();
    let reason = unhashed_reason(locate(&model_ref(absolute, vec!["loras"]), &roots));
    assert!(reason.contains("absolute"), "{reason}");

    // A link the user put in the folder (one shared model store) is followed, and marked:
    // ComfyUI loads through it (issue #28, found on a real 0.8.0 whose models were links).
    match locate(&model_ref("link-out.safetensors", vec!["loras"]), &roots) {
        Location::Located {
            path, linked_out, ..
        } => {
            assert_eq!(path, fs::canonicalize(&outside).unwrap());
            assert!(linked_out);
        }
        other => panic!("{other:?}"),
    }
    // So is a folder under the root that is a link into the store.
    let store = dir.path().join("store/loras");
    fs::create_dir_all(&store).unwrap();
    fs::write(store.join("shared.safetensors"), b"shared").unwrap();
    std::os::unix::fs::symlink(&store, root.join("loras/store")).unwrap();
    match locate(
        &model_ref("store/shared.safetensors", vec!["loras"]),
        &roots,
    ) {
        Location::Located {
            path, linked_out, ..
        } => {
            assert_eq!(
                path,
                fs::canonicalize(store.join("shared.safetensors")).unwrap()
            );
            assert!(linked_out);
        }
        other => panic!("{other:?}"),
    }

    let inside = fs::canonicalize(root.join("loras/sd15/inside.safetensors")).unwrap();
    for name in [
        "link-in.safetensors",
        "sd15/inside.safetensors",
        "sd15\\inside.safetensors",
    ] {
        match locate(&model_ref(name, vec!["loras"]), &roots) {
            Location::Located {
                path,
                folder,
                linked_out,
            } => {
                assert_eq!(path, inside, "{name}");
                assert_eq!(folder, "loras");
                assert!(!linked_out, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }

    let reason = unhashed_reason(locate(
        &model_ref("nope.safetensors", vec!["loras"]),
        &roots,
    ));
    assert!(
        reason.starts_with("not found under any --models-dir root (searched: "),
        "{reason}"
    );
    assert!(reason.contains("nope.safetensors"), "{reason}");

    let reason = unhashed_reason(locate(
        &model_ref("sd15/inside.safetensors", vec!["loras"]),
        &[],
    ));
    assert!(reason.contains("no --models-dir given"), "{reason}");
}

#[test]
fn locate_searches_legacy_folders_and_every_root_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a/models"), dir.path().join("b/models"));
    fs::create_dir_all(a.join("diffusion_models")).unwrap();
    fs::create_dir_all(b.join("unet")).unwrap();
    fs::create_dir_all(b.join("clip")).unwrap();
    fs::write(b.join("unet/flux1-dev-Q8_0.gguf"), b"gguf").unwrap();
    fs::write(b.join("clip/clip_l.safetensors"), b"clip").unwrap();
    let roots = vec![a, b.clone()];
    let prompt = json!({
        "31": {"class_type": "UnetLoaderGGUF", "inputs": {"unet_name": "flux1-dev-Q8_0.gguf"}},
        "41": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors", "clip_name2": ["9", 0]}}
    });
    let refs = model_references(&prompt);
    assert_eq!(refs.len(), 2);
    match locate(&refs[0], &roots) {
        Location::Located { path, folder, .. } => {
            assert_eq!(folder, "unet");
            assert_eq!(
                path,
                fs::canonicalize(b.join("unet/flux1-dev-Q8_0.gguf")).unwrap()
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        locate(&refs[1], &roots),
        Location::Located { folder: "clip", .. }
    ));
}

#[test]
fn hash_components_hashes_found_files_and_explains_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("models");
    fs::create_dir_all(root.join("checkpoints")).unwrap();
    fs::create_dir_all(root.join("loras")).unwrap();
    let ckpt = pseudo_random(100_000, 3);
    let lora = pseudo_random(5_000, 4);
    fs::write(root.join("checkpoints/sd15.safetensors"), &ckpt).unwrap();
    fs::write(root.join("loras/detail.safetensors"), &lora).unwrap();
    let prompt = json!({
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd15.safetensors"}},
        "10": {"class_type": "LoraLoader", "inputs": {"lora_name": "detail.safetensors", "model": ["4", 0], "clip": ["4", 1]}},
        "11": {"class_type": "LoraLoader", "inputs": {"lora_name": "detail.safetensors", "model": ["10", 0], "clip": ["10", 1]}},
        "12": {"class_type": "VAELoader", "inputs": {"vae_name": "missing_vae.safetensors"}},
        "3": {"class_type": "KSampler", "inputs": {"seed": 1, "model": ["11", 0]}}
    });
    let cache_path = dir.path().join("runs/.hash-cache.json");
    let mut cache = HashCache::open(&cache_path);
    let components = hash_components(&prompt, &[root], Some(&mut cache));
    cache.save().unwrap();

    let by_node: BTreeMap<&str, &ComponentHash> =
        components.iter().map(|c| (c.node_id.as_str(), c)).collect();
    assert_eq!(components.len(), 4);
    let c = by_node["4"];
    assert_eq!(c.status, ComponentStatus::Hashed);
    assert_eq!(c.folder, "checkpoints");
    assert_eq!(c.size, Some(100_000));
    let expected = hex::encode(Sha256::digest(&ckpt));
    assert_eq!(c.sha256.as_deref(), Some(expected.as_str()));
    assert_eq!(c.autov2.as_deref(), Some(&expected[..10]));
    for node in ["10", "11"] {
        assert_eq!(
            by_node[node].sha256,
            Some(hex::encode(Sha256::digest(&lora)))
        );
        assert_eq!(by_node[node].input, "lora_name");
    }
    let vae = by_node["12"];
    assert_eq!(vae.status, ComponentStatus::Unhashed);
    assert_eq!(vae.folder, "vae");
    assert!(vae.reason.as_deref().unwrap().contains("not found"));
    assert_eq!(vae.sha256, None);
    assert_eq!(HashCache::open(&cache_path).len(), 2);

    // Run records embed these: JSON round trip, and no empty fields for unhashed entries.
    let text = serde_json::to_string(&components).unwrap();
    let back: Vec<ComponentHash> = serde_json::from_str(&text).unwrap();
    assert_eq!(back, components);
    let value: Value = serde_json::from_str(&text).unwrap();
    let unhashed = value
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["node_id"] == "12")
        .unwrap();
    assert_eq!(unhashed["status"], "unhashed");
    assert!(unhashed.get("sha256").is_none());
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `properties.models` of every UI node (and subgraph node): file name → directories.
fn template_model_dirs(template: &Value) -> BTreeMap<String, BTreeSet<String>> {
    let mut nodes: Vec<&Value> = template["nodes"].as_array().into_iter().flatten().collect();
    for subgraph in template["definitions"]["subgraphs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        nodes.extend(subgraph["nodes"].as_array().into_iter().flatten());
    }
    let mut dirs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in nodes {
        for model in node["properties"]["models"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let (Some(name), Some(dir)) = (model["name"].as_str(), model["directory"].as_str()) {
                dirs.entry(name.into()).or_default().insert(dir.into());
            }
        }
    }
    dirs
}

/// Oracle: the official templates state, per loader, which model file it needs and in which
/// `models/` directory. Every API input naming such a file must yield a reference in that folder.
#[test]
fn every_template_loader_yields_a_reference_in_the_templates_folder() {
    let api_dir = Path::new("tests/corpus/templates-api-newer");
    let ui_dir = Path::new("tests/corpus/templates");
    let mut checked = 0;
    let mut templates_with_models = 0;
    let mut folders_seen = BTreeSet::new();
    for entry in fs::read_dir(api_dir).expect("the corpus is at tests/corpus") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let ui = ui_dir.join(path.file_name().unwrap());
        let dirs = template_model_dirs(&read_json(&ui));
        let prompt = read_json(&path);
        let refs = model_references(&prompt);
        let mut any = false;
        for (node_id, node) in prompt.as_object().unwrap() {
            for (input, value) in node["inputs"].as_object().unwrap() {
                let Some(file) = value.as_str() else { continue };
                let Some(expected_dirs) = dirs.get(file) else {
                    continue;
                };
                let found = refs
                    .iter()
                    .find(|r| &r.node_id == node_id && &r.input == input)
                    .unwrap_or_else(|| {
                        panic!(
                            "{}: node {node_id} ({}) input {input} = {file} gives no reference",
                            path.display(),
                            node["class_type"]
                        )
                    });
                assert_eq!(found.file, file);
                assert!(
                    expected_dirs.iter().any(|d| found.folders.contains(&d.as_str())),
                    "{}: node {node_id} ({}) {input}: folders {:?}, template says {expected_dirs:?}",
                    path.display(),
                    found.class_type,
                    found.folders
                );
                folders_seen.extend(expected_dirs.iter().cloned());
                checked += 1;
                any = true;
            }
        }
        templates_with_models += usize::from(any);
    }
    assert!(checked > 300, "only {checked} loader inputs checked");
    assert!(templates_with_models > 100, "{templates_with_models}");
    for folder in [
        "checkpoints",
        "diffusion_models",
        "loras",
        "vae",
        "text_encoders",
        "clip_vision",
    ] {
        assert!(
            folders_seen.contains(folder),
            "no template used {folder}: {folders_seen:?}"
        );
    }
}

fn refs_of(workflow: &str) -> Vec<(String, String, String, &'static str)> {
    let path = Path::new("tests/fixtures/custom-nodes/workflows").join(workflow);
    model_references(&read_json(&path))
        .into_iter()
        .map(|r| (r.node_id, r.input, r.file, r.folders[0]))
        .collect()
}

fn row(
    node: &str,
    input: &str,
    file: &str,
    folder: &'static str,
) -> (String, String, String, &'static str) {
    (node.into(), input.into(), file.into(), folder)
}

#[test]
fn custom_node_loaders_power_lora_rows_and_gguf() {
    let mut got = refs_of("flux_dev_gguf_power_lora_usdu.json");
    got.sort();
    let mut expected = vec![
        row("31", "unet_name", "flux1-dev-Q8_0.gguf", "diffusion_models"),
        row("41", "clip_name1", "clip_l.safetensors", "text_encoders"),
        row(
            "41",
            "clip_name2",
            "t5-v1_1-xxl-encoder-Q8_0.gguf",
            "text_encoders",
        ),
        row("10", "vae_name", "ae.safetensors", "vae"),
        row(
            "52",
            "lora_1",
            "flux/flux_realism_lora.safetensors",
            "loras",
        ),
        row(
            "52",
            "lora_2",
            "flux/aidmaImageUpgrader-FLUX-v0.3.safetensors",
            "loras",
        ),
        row(
            "52",
            "lora_3",
            "flux/FLUX.1-Turbo-Alpha.safetensors",
            "loras",
        ),
        row("60", "model_name", "4x-UltraSharp.pth", "upscale_models"),
    ];
    expected.sort();
    assert_eq!(got, expected, "lora_4 is switched off and must not appear");
}

#[test]
fn custom_node_loaders_wrapper_easy_use_and_rife() {
    let mut got = refs_of("wanvideowrapper_t2v_blockswap_teacache_loras.json");
    got.sort();
    let mut expected = vec![
        row(
            "11",
            "model_name",
            "umt5-xxl-enc-bf16.safetensors",
            "text_encoders",
        ),
        row(
            "56",
            "lora",
            "wan/Wan21_CausVid_14B_T2V_lora_rank32.safetensors",
            "loras",
        ),
        row(
            "57",
            "lora",
            "wan/wan_smooth_motion_v2.safetensors",
            "loras",
        ),
        row(
            "22",
            "model",
            "Wan2_1-T2V-14B_fp8_e4m3fn.safetensors",
            "diffusion_models",
        ),
        row("38", "model_name", "Wan2_1_VAE_bf16.safetensors", "vae"),
    ];
    expected.sort();
    assert_eq!(got, expected);

    let easy = refs_of("sd15_easyuse_hiresfix_model_upscale.json");
    assert!(easy.contains(&row(
        "13",
        "ckpt_name",
        "realisticVisionV60B1_v51HyperVAE.safetensors",
        "checkpoints"
    )));
    assert!(easy.contains(&row(
        "13",
        "lora_name",
        "sd15/add_detail.safetensors",
        "loras"
    )));
    assert!(easy.contains(&row(
        "14",
        "lora_1_name",
        "sd15/epi_noiseoffset2.safetensors",
        "loras"
    )));
    assert!(
        easy.iter().all(|r| r.2 != "None" && r.2 != "Baked VAE"),
        "{easy:?}"
    );

    // RIFE keeps its checkpoints in the pack's own folder; LoadImage reads input/, not models/.
    let wan = refs_of("wan22_i2v_gguf_lightning_sage_teacache_rife.json");
    assert!(
        wan.iter()
            .all(|r| r.2 != "rife47.pth" && r.2 != "wan_start_frame.png"),
        "{wan:?}"
    );
    assert_eq!(wan.len(), 6, "{wan:?}");
}
