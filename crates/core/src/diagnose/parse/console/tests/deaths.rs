//! Signs that the process died, and lookalikes that are none (a survived fault, a headerless
//! stack, pip's exit code, a launcher's pause before a fresh start).

use super::*;

/// PyTorch's terminate handler (c10/util/AbortHandler.h) prints this, then aborts.
#[test]
fn pytorch_abort_handler_is_a_death() {
    let log = "Checkpoint files will always be loaded safely.\nUnhandled exception caught in c10/util/AbortHandler.h\n00007FFA79B2A9BC00007FFA79B19EB0 torch_python.dll!initModule [<unknown file> @ <unknown line number>]\n";
    kind_of(log, FailureKind::ProcessKilled);
}

/// bash's report of a killed child, with the command after `Killed`.
#[test]
fn a_shell_job_line_is_a_death() {
    kind_of("app | /home/x/entrypoint.sh: line 42:     8 Killed                  python3 ./ComfyUI/main.py --listen\n", FailureKind::ProcessKilled);
    kind_of(
        "[1]+  Killed                  python main.py\n",
        FailureKind::ProcessKilled,
    );
}

#[test]
fn fatal_python_error_aborted_is_a_death() {
    let log = "got prompt\nRequested to load WAN21\n 50%|#####     | 10/20 [01:40<01:40, 10.00s/it]\nFatal Python error: Aborted\n";
    let p = parse_input(log).unwrap();
    assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::ServerLost));
    assert_eq!(
        p.signals.death.as_deref(),
        Some("Fatal Python error: Aborted")
    );
    let d = crate::diagnose::diagnose_input(&p);
    assert_eq!(d.kind, crate::vocab::FailureKind::ProcessKilled);
    assert_eq!(d.stage, crate::vocab::Stage::SampleMiddle, "{d:?}");
}

#[test]
fn killed_after_shard_loading() {
    let log = "Loading text encoder model (vlm) from: /x\nLoading checkpoint shards:  75%|█████▎  | 3/4 [01:34<00:31, 31.54s/it]Killed";
    let p = parse_input(log).unwrap();
    assert_eq!(p.evidence.outcome, Some(RunOutcomeHint::ServerLost));
    assert!(p.signals.death.is_some());
    assert!(matches!(p.signals.tail, Some(ConsoleTail::ModelLoading(_))));
}

/// A fault handler's stack with its `Windows fatal exception` / `Fatal Python error` line cut
/// away: `Current thread 0x…` is only printed by a thread dumping itself (a fatal error),
/// `Thread 0x…` and `Stack …` also by the hang watchdog (labelling rule 3: no death sign).
/// Either way the stack (most recent call first) places the stage.
#[test]
fn a_fault_handler_stack_header_is_a_death_only_when_it_names_the_current_thread() {
    use crate::vocab::{FailureKind, Stage};
    for (header, kind) in [
        (
            "Current thread 0x00001a2b (most recent call first):",
            FailureKind::ProcessKilled,
        ),
        (
            "Thread 0x00007f3e (most recent call first):",
            FailureKind::Unknown,
        ),
        ("Stack (most recent call first):", FailureKind::Unknown),
    ] {
        let log = format!("got prompt\n{header}\n  File \"/c/comfy/utils.py\", line 136 in load_torch_file\n  File \"/c/comfy/sd.py\", line 9 in load_clip\n  File \"/c/execution.py\", line 3 in execute\n");
        let d = crate::diagnose::diagnose_text(&log).unwrap();
        assert_eq!(d.kind, kind, "{header}: {}", d.kind_evidence);
        assert_eq!(d.stage, Stage::Load, "{header}: {}", d.stage_evidence);
    }
}

/// Issue #40: the signs that the process died still make it `process_killed`.
#[test]
fn death_signs_other_than_killed() {
    use crate::vocab::FailureKind;
    for end in [
        "Process exited with code 1",
        "exit code: -9",
        "请按任意键继续. . .",
        "Starting server\n\nTo see the GUI go to: http://127.0.0.1:8188",
    ] {
        let log = format!("got prompt\nRequested to load WAN21\n{end}\n");
        let d = crate::diagnose::diagnose_text(&log).unwrap();
        assert_eq!(
            d.kind,
            FailureKind::ProcessKilled,
            "{end}: {}",
            d.kind_evidence
        );
    }
}

/// Windows' Application Error record (event 1000) is a crash; the faulting module names
/// whose code it was in (comfy-aimdo#48: `aimdo.dll`, a stack overflow).
#[test]
fn a_windows_crash_record_is_a_death_and_names_its_module() {
    use crate::vocab::FailureKind;
    let record = |module: &str| {
        format!("Faulting application: python.exe (3.13.11150.1013)\nFaulting module:      {module} (0.0.0.0, timestamp 0x69ea3089)\nException code:       0xc00000fd\n")
    };
    let d = crate::diagnose::diagnose_text(&record("aimdo.dll")).unwrap();
    assert_eq!(d.kind, FailureKind::Aimdo, "{}", d.kind_evidence);
    let d = crate::diagnose::diagnose_text(&record("ucrtbase.dll")).unwrap();
    assert_eq!(d.kind, FailureKind::ProcessKilled, "{}", d.kind_evidence);
}

/// The launcher's pause after a run ended is the process exiting, not the run's failure:
/// the run's own exception is the answer.
#[test]
fn an_exit_after_a_finished_run_does_not_hide_its_error() {
    let log = "got prompt\n!!! Exception during processing !!! CUDA error: an illegal memory access was encountered\ntorch.AcceleratorError: CUDA error: an illegal memory access was encountered\n\nPrompt executed in 48.03 seconds\n\nC:\\ComfyUI_windows_portable>pause\nPress any key to continue . . .\n";
    let parsed = parse_input(log).unwrap();
    assert_eq!(
        parsed.evidence.exception_type.as_deref(),
        Some("torch.AcceleratorError")
    );
    assert!(parsed.signals.death.is_none(), "{:?}", parsed.signals.death);
    // With no error before it, the pause after a run is still read as the process ending.
    let quiet = "got prompt\nPrompt executed in 3.00 seconds\nPress any key to continue . . .\n";
    assert!(parse_input(quiet).unwrap().signals.death.is_some());
}

// Round six (issue #40): rules read from what the programs print.

#[test]
fn a_windows_fault_the_process_survived_is_no_death() {
    // faulthandler's vectored handler reports the access violation, the process handles it
    // and goes on loading: no death sign, and the frames without an exception name no kind.
    let log = "got prompt\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"C:\\ComfyUI\\comfy\\ops.py\", line 549 in _load_from_state_dict\n  File \"C:\\ComfyUI\\execution.py\", line 344 in get_output_data\n[INFO] Using split attention in VAE\n[INFO] Requested to load SD1ClipModel\n[INFO] loaded completely;  235.84 MB loaded, full load: True\n";
    let d = kind_of(log, FailureKind::Unknown);
    assert!(!d.kind_evidence.contains("died"), "{}", d.kind_evidence);
    // The same fault as the last thing the process printed is a death.
    let last = "got prompt\n[INFO] Requested to load SD1ClipModel\n[INFO] loaded completely;  235.84 MB loaded, full load: True\nWindows fatal exception: access violation\n\nStack (most recent call first):\n  File \"C:\\ComfyUI\\comfy\\ops.py\", line 549 in forward\n";
    kind_of(last, FailureKind::ProcessKilled);
}

#[test]
fn a_fault_handler_stack_without_its_header_is_no_death_sign() {
    let stack = "  File \"C:\\ComfyUI\\comfy\\ldm\\flux\\layers.py\", line 235 in forward\n  File \"C:\\ComfyUI\\execution.py\", line 306 in process_inputs\n";
    // `Stack (most recent call first):` is also the hang watchdog's header.
    kind_of(
        &format!("Stack (most recent call first):\n{stack}"),
        FailureKind::Unknown,
    );
    // `Current thread 0x…` is printed only by a thread dumping itself: a fatal error.
    kind_of(
        &format!("Current thread 0x00006d3c (most recent call first):\n{stack}"),
        FailureKind::ProcessKilled,
    );
}

#[test]
fn a_fatal_abort_after_the_error_is_the_failure() {
    // libstdc++'s terminate handler prints the uncaught C++ exception, then aborts.
    let log = "got prompt\n 12%|█         | 1/8 [01:03<07:26, 63.75s/it]\nterminate called after throwing an instance of 'c10::AcceleratorError'\n  what():  CUDA error: an illegal memory access was encountered\n\nFatal Python error: Aborted\n\nStack (most recent call first):\n  File \"/c/comfy/ldm/model.py\", line 1 in forward\n";
    kind_saying(
        log,
        FailureKind::ProcessKilled,
        &["Fatal Python error: Aborted", "illegal memory access"],
    );
    // A Python exception that ends the interpreter (exit code 1) keeps its own kind.
    let exit = "Traceback (most recent call last):\n  File \"/c/run.py\", line 53, in wait\n    raise RuntimeError(\"ComfyUI did not become ready\")\nRuntimeError: ComfyUI did not become ready at http://127.0.0.1:8188 within 180s\nProcess finished with exit code 1.\n";
    kind_of(exit, FailureKind::Other);
}

#[test]
fn a_death_sign_hard_wrapped_across_lines_is_read() {
    let log = "got prompt\n  0%|          | 0/2 [00:00<?, ?it/s,   Model Initializing ...  ]Fatal Python\n error: Aborted\n";
    kind_of(log, FailureKind::ProcessKilled);
}

#[test]
fn systemd_coredump_records_a_death() {
    let log = "Memory access fault by GPU node-1 (Agent handle: 0x55f8b54eec30) on address 0x7f2a53193000. Reason: Page not present or supervisor privilege.\nJan 09 18:55:45 host systemd-coredump[134090]: Process 91762 (python) of user 60105 terminated abnormally with signal 6/ABRT, processing...\n";
    kind_of(log, FailureKind::ProcessKilled);
    // Without it, the HSA runtime's page fault report is the failure, not a memory one.
    kind_of(
        "Memory access fault by GPU node-1 (Agent handle: 0x563f6f3b7420) on address 0x7f88b5c01000. Reason: Page not present or supervisor privilege.\nGPU core dump created: gpucore.7155\n",
        FailureKind::Other,
    );
}

#[test]
fn a_user_space_oom_killer_ending_comfyui_is_a_death() {
    let log = "Aug 04 10:39:10 debian earlyoom[845]: low memory! at or below SIGTERM limits: mem  3.00%, swap 10.00%\nAug 04 10:39:10 debian earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3.13\": oom_score 1282, VmRSS 29931 MiB, cmdline \"/home/user/env/bin/python3.13 main.py --listen 0.0.0.0\"\nAug 04 10:39:12 debian earlyoom[845]: process 322603 exited after 2.805 seconds\n";
    kind_saying(log, FailureKind::ProcessKilled, &["out-of-memory killer"]);
}

/// Labelling rules' second amendments: pip failing to build a node pack's requirement is the
/// failure (its `exit code: 1` is its build step's, no death); LLVM's Windows crash record and
/// a restart after the run's model loading (a journal's new process) are deaths; a kernel or
/// earlyoom journal line keeps its program's name.
#[test]
fn pip_failures_crash_records_and_restarts() {
    let pip = "Collecting git+https://github.com/example/pkg.git\n  Installing build dependencies: finished with status 'done'\n  Getting requirements to build wheel: finished with status 'error'\n  error: subprocess-exited-with-error\n\n  Getting requirements to build wheel did not run successfully.\n  exit code: 1\n\n  [23 lines of output]\n";
    let d = kind_of(pip, FailureKind::Other);
    assert!(
        d.kind_evidence.contains("no out-of-memory"),
        "{}",
        d.kind_evidence
    );
    kind_saying(
        "Requested to load Lumina2\nloaded completely; 12286.07 MB usable, 11739.54 MB loaded, full load: True\n  0%|          | 0/9 [00:00<?, ?it/s]Exception Code: 0x80000003\n  #0 0x00007ff941fbd9e5 (H:\\ComfyUI\\python_embeded\\Lib\\site-packages\\triton\\_C\\libtriton.pyd+0x3e5d9e5)\n  #1 0x00007ffa6d031881 (C:\\Windows\\System32\\ucrtbase.dll+0x71881)\n",
        FailureKind::ProcessKilled,
        &["Exception Code: 0x80000003"],
    );
    let journal = "Nov 24 10:19:34 host python3[20275]: 10:19:34 | INFO     | - | Requested to load FluxClipModel_\nNov 24 10:19:34 host python3[20275]: 10:19:34 | INFO     | - | loaded completely; 95.00 MB usable, 323.95 MB loaded, full load: True\nNov 24 10:19:56 host python3[20453]: 10:19:56 | INFO     | - | ### Loading: ComfyUI-Manager (V3.37.1)\nNov 24 10:19:56 host python3[20453]: Import times for custom nodes:\nNov 24 10:19:56 host python3[20453]: 10:19:56 | INFO     | - |    0.0 seconds: /home/user/ComfyUI/custom_nodes/websocket_image_save.py\n";
    kind_saying(journal, FailureKind::ProcessKilled, &["startup banner"]);
    kind_saying(
        "Aug 04 10:39:10 host earlyoom[845]: sending SIGTERM to process 322603 uid 1000 \"python3\": oom_score 1282, VmRSS 29931 MiB, cmdline \"/home/user/env/bin/python3 main.py\"\n",
        FailureKind::ProcessKilled,
        &["out-of-memory killer"],
    );
}

/// The launcher's pause at the top of a paste, then ComfyUI starting again with nothing of a run
/// before the pause: the process that died is not in the text. The same pause after a run is
/// that run's death; a message in a node's words (`Node: Torch not compiled with CUDA enabled`)
/// is an error.
#[test]
fn a_pause_before_a_fresh_start_is_not_the_texts_failure() {
    let fresh = "=====================\n请按任意键继续. . . [START] Security scan\n[DONE] Security scan\n** ComfyUI startup time: 2026-03-14 10:34:46.004\n** Platform: Windows\n[PRE] ComfyUI-Manager\n";
    assert!(crate::diagnose::diagnose_text(fresh).is_err());
    kind_of(
        "got prompt\nRequested to load WAN21\nloaded completely 9000 6000 True\nPress any key to continue . . .\n** ComfyUI startup time: 2026-03-14 10:34:46.004\n",
        FailureKind::ProcessKilled,
    );
    kind_of(
        "DiffuEraserSampler: Torch not compiled with CUDA enabled",
        FailureKind::Other,
    );
}

/// ComfyUI-Manager's restart (`Restarting... [Legacy Mode]`, its command, then the launcher's
/// pause and a new start-up) was asked for: no death. The same pause after a run is one.
#[test]
fn a_restart_the_manager_asked_for_is_no_death() {
    let restart = "Installation was successful.\nAfter restarting ComfyUI, please refresh the browser.\n\nRestarting... [Legacy Mode]\n\n\nCommand: ['\"python.exe\"', '\"main.py\"']\nPress any key to continue . . . [INFO] setup plugin alembic.autogenerate.schemas\n** ComfyUI startup time: 2026-04-22 23:19:32.613\n** Platform: Windows\n";
    assert!(crate::diagnose::diagnose_text(restart).is_err());
    let died = "Restarting... [Legacy Mode]\n\n** ComfyUI startup time: 2026-04-22 23:19:32.613\ngot prompt\nRequested to load WAN21\nloaded completely 9000 6000 True\nPress any key to continue . . .\n";
    kind_of(died, FailureKind::ProcessKilled);
}

/// The portable build's launcher after `python.exe` returned: its hint `If you see this and
/// ComfyUI did not start …` and, with echo on, the batch prompt's `…>pause` line are signs the
/// process ended. A Python exception whose words hold a death sign (`CalledProcessError: …
/// returned non-zero exit status 1.`) is that exception: a child process exited, not ComfyUI.
#[test]
fn the_launchers_lines_after_python_exits_are_a_death_and_an_exception_line_is_none() {
    let launcher = "E:\\AI\\ComfyUI_windows_portable>echo If you see this and ComfyUI did not start try updating your Nvidia Drivers to the latest.\nIf you see this and ComfyUI did not start try updating your Nvidia Drivers to the latest.\n\nE:\\AI\\ComfyUI_windows_portable>pause\n";
    kind_of(launcher, FailureKind::ProcessKilled);
    kind_of(
        "got prompt\nRequested to load WAN21\nloaded completely 9000 6000 True\nC:\\ComfyUI_windows_portable>pause\n",
        FailureKind::ProcessKilled,
    );
    let child = "got prompt\nTraceback (most recent call last):\n  File \"C:\\ComfyUI\\nodes.py\", line 1627, in sample\n    return common_ksampler(model)\nsubprocess.CalledProcessError: Command '['tcc.exe', 'cuda_utils.c']' returned non-zero exit status 1.\n";
    message_saying(child, FailureKind::Other, "non-zero exit status 1");
}

/// A shell's report that any fatal signal ended the job is a death, like `Killed`: bash's
/// `strsignal` word alone or in its job line, macOS's with the signal's number, zsh's and
/// fish's wordings (labelling rule 3, third amendments). The same words inside a sentence are
/// none.
#[test]
fn a_shell_reporting_any_fatal_signal_is_a_death() {
    let run = "got prompt\nRequested to load WAN21\nloaded partially 5000.0 MB\n 10%|█         | 2/20 [00:30<04:30, 15.0s/it]\n";
    let signs = [
        "Terminated",
        "Aborted",
        "Bus error (core dumped)",
        "Illegal instruction",
        "Floating point exception",
        "Trace/breakpoint trap",
        "Abort trap: 6",
        "Killed: 9",
        "run.sh: line 3:  4242 Terminated              python main.py",
        "[1]+  Aborted (core dumped)    python main.py",
        "zsh: killed     python main.py --listen",
        "zsh: abort      python main.py",
        "[1]    12345 killed     python main.py",
        "fish: Job 1, 'python main.py' terminated by signal SIGABRT (Abort)",
    ];
    let none = [
        "Operation Aborted",
        "Download terminated",
        "the job was aborted by the user",
    ];
    deaths_after(run, &signs, &none, crate::vocab::Stage::SampleMiddle);
}

/// Each of `signs` after `run` is a death at `stage` (the run's last activity); each of `none`
/// is no sign: the log just ends.
fn deaths_after(run: &str, signs: &[&str], none: &[&str], stage: crate::vocab::Stage) {
    for sign in signs {
        let d = kind_of(&format!("{run}{sign}\n"), FailureKind::ProcessKilled);
        assert_eq!(d.stage, stage, "{sign}: {d:?}");
    }
    for words in none {
        kind_of(&format!("{run}{words}\n"), FailureKind::Unknown);
    }
}

/// The kernel's and Windows' words for a process or the machine going down are deaths: a
/// kernel panic, the older oom-killer wording, the kernel's segfault record, a container's
/// `OOMKilled`, the crash dialogs and Event Viewer's Application Error record, a bugcheck (blue
/// screen, its record at the next boot, a debugger's analysis). A display driver that recovered
/// (TDR) is none, and neither is a reporter's sentence with a crash dialog's words in it.
#[test]
fn the_systems_words_for_a_process_or_machine_going_down_are_deaths() {
    let run = "got prompt\nRequested to load WAN21\nloaded completely 9000 6000 True\n  0%|          | 0/20 [00:00<?, ?it/s]\n";
    let signs = [
        "Kernel panic - not syncing: Out of memory and no killable processes...",
        "Out of memory: Kill process 4242 (python) score 912 or sacrifice child",
        "[ 8123.456] python3[4242]: segfault at 0 ip 00007f3a1c2b3c4d sp 00007ffd2e3f4a50 error 4 in libc.so.6",
        "    Last State:  Terminated\n      Reason:    OOMKilled",
        "python.exe has stopped working",
        "Python quit unexpectedly.",
        "The instruction at 0x00007FF8A1B2C3D4 referenced memory at 0x0000000000000000. The memory could not be read.",
        "Faulting application name: python.exe, version: 3.12.7150.1013, time stamp: 0x66f0a1b2",
        "The computer has rebooted from a bugcheck.  The bugcheck was: 0x00000133 (0x0000000000000001, 0x0000000000001e00, 0xfffff8072d6fb320, 0x0000000000000000).",
        "Your PC ran into a problem and needs to restart.\nStop code: VIDEO_TDR_FAILURE",
        "DPC_WATCHDOG_VIOLATION (133)",
        "DPC_WATCHDOG_VIOLATION (0x133)\nArg1: 0 (one DPC/ISR exceeded its time allotment)",
        "BugCheck 116, {ffffe00123456010, fffff80123456789, 0, d}",
    ];
    let none = [
        "Display driver nvlddmkm stopped responding and has successfully recovered.",
        "so then ComfyUI has stopped working and quit unexpectedly",
    ];
    deaths_after(run, &signs, &none, crate::vocab::Stage::SampleFirst);
}

/// Words of a death that are not the server's: another systemd unit's main process ending, a
/// child process's exit that Python's subprocess reports, a line quoted in prose, a Windows
/// fault Python printed a traceback after, a launcher's hint before the fresh start it echoes.
#[test]
fn deaths_of_something_else_are_not_the_servers() {
    let other_unit = "nov 06 06:01:02 host systemd[2257]: xdg-desktop-portal-gtk.service: Main process exited, code=exited, status=1/FAILURE\n";
    let d = crate::diagnose::diagnose_text(other_unit);
    assert!(d.is_err() || d.unwrap().kind != FailureKind::ProcessKilled);
    kind_of(
        "nov 06 06:01:02 host systemd[1]: comfyui.service: Main process exited, code=killed, status=9/KILL\n",
        FailureKind::ProcessKilled,
    );
    message_saying(
        "> Command '['tcc.exe', 'launcher.c', '-O3']' returned non-zero exit status 1.\n",
        FailureKind::Other,
        "returned non-zero exit status",
    );
    let quoted = "“If you see this and ComfyUI did not start, try updating your Nvidia drivers.”\n";
    let d = crate::diagnose::diagnose_text(quoted);
    assert!(d.is_err() || d.unwrap().kind != FailureKind::ProcessKilled);
    let survived = "Windows fatal exception: access violation\n\nStack (most recent call first):\n  File \"D:\\C\\torch\\__init__.py\", line 261 in _load_dll_libraries\n  File \"D:\\C\\ComfyUI\\main.py\", line 194 in <module>\nTraceback (most recent call last):\n  File \"D:\\C\\ComfyUI\\main.py\", line 194, in <module>\n    import comfy.utils\nOSError: [WinError 1114] A dynamic link library (DLL) initialization routine failed.\n";
    message_saying(survived, FailureKind::Other, "WinError 1114");
    let relaunch = "K:\\ComfyUI_windows_portable>echo If you see this and ComfyUI did not start try updating your Nvidia Drivers to the latest.\nIf you see this and ComfyUI did not start try updating your Nvidia Drivers to the latest.\nK:\\ComfyUI_windows_portable>.\\python_embeded\\python.exe -s ComfyUI\\main.py --windows-standalone-build\nsetup plugin alembic.autogenerate.schemas\n";
    assert!(crate::diagnose::diagnose_text(relaunch).is_err());
}
