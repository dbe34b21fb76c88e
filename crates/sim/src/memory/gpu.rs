//! The simulated device as the allocator sees it: loaded models (unloaded least recently used
//! first to make room), working memory in chunks, the caching allocator's reserve, and the
//! console lines of model loads.

use super::{MIB, NON_TORCH_OVERHEAD};

/// The server-wide settings the memory model honours: what the launch flags and the
/// allocator environment change (`flags.rs` turns a command line into these). The default
/// is a 0.3.64 server started with no memory flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Knobs {
    /// Dynamic VRAM (2026 servers unless `--disable-dynamic-vram`): weights that do not fit
    /// stream from host RAM during each pass, so a load never fails and the sampler leaves room
    /// for its whole activation estimate; what does not fit is slower, not an OOM.
    pub dynamic: bool,
    /// Device memory kept free at each load beyond the default reserve (`--reserve-vram`).
    pub extra_reserve: u64,
    /// Device memory dynamic VRAM keeps free at each load (`--vram-headroom`; no effect
    /// without dynamic VRAM).
    pub headroom: u64,
    /// Factor on a sampler's activation memory (the attention backend).
    pub attention_memory: f64,
    /// Factor on a sampler's step time (the attention backend).
    pub attention_time: f64,
    /// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`: freed blocks go back to growable
    /// segments, so little stays reserved-but-unallocated between nodes.
    pub expandable_segments: bool,
    /// Pinned host memory (2026 servers unless `--disable-pinned-memory`): the offloaded part
    /// of each partially loaded model is page-locked in host RAM.
    pub pinned: bool,
    /// `--novram`: every model may load partially, also the ones that otherwise move whole.
    pub novram: bool,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            dynamic: false,
            extra_reserve: 0,
            headroom: 0,
            attention_memory: 1.0,
            attention_time: 1.0,
            expandable_segments: false,
            pinned: false,
            novram: false,
        }
    }
}

#[derive(Debug, Clone)]
struct Loaded {
    key: String,
    bytes: u64,
    /// Weights of this model left in host RAM (a partial or dynamic load).
    offloaded: u64,
    last_used: u64,
}

/// The simulated device: loaded models and the allocator's view.
#[derive(Debug, Clone)]
pub struct Gpu {
    pub total: u64,
    loaded: Vec<Loaded>,
    clock: u64,
    /// Working memory of the node currently running (for `/system_stats`).
    pub active: u64,
    /// Reserved-but-unallocated bytes the caching allocator keeps.
    pub cached: u64,
    /// `--lowvram`: partial loads leave room for the full activation estimate (and then some).
    pub lowvram: bool,
    /// Device memory held outside PyTorch's allocator and never given back (the `leak` fault).
    pub leaked: u64,
    /// Device memory each sampling step after the first keeps (the `step-growth` fault).
    pub step_growth: u64,
    /// What the launch flags change (see [`Knobs`]).
    pub knobs: Knobs,
    /// The prompt being run asks for live sampler previews (`extra_data.preview_method` other
    /// than `none`): each sampling step also decodes a preview.
    pub previews: bool,
    /// Console lines of the loads made while planning the current node (ComfyUI's
    /// `Requested to load X` / `loaded completely|partially …`), moved into
    /// [`Plan::console`](super::Plan::console).
    pub(super) console: Vec<String>,
}

impl Gpu {
    pub fn new(total: u64) -> Gpu {
        Gpu {
            total,
            loaded: Vec::new(),
            clock: 0,
            active: 0,
            cached: 0,
            lowvram: false,
            leaked: 0,
            step_growth: 0,
            knobs: Knobs::default(),
            previews: false,
            console: Vec::new(),
        }
    }

    /// Bytes PyTorch may use at all.
    pub fn budget(&self) -> u64 {
        self.total
            .saturating_sub(NON_TORCH_OVERHEAD)
            .saturating_sub(self.leaked)
    }

    /// Bytes held by loaded models.
    pub(crate) fn resident(&self) -> u64 {
        self.loaded.iter().map(|l| l.bytes).sum()
    }

    /// Weights of loaded models left in host RAM (partial and dynamic loads).
    pub fn offloaded(&self) -> u64 {
        self.loaded.iter().map(|l| l.offloaded).sum()
    }

    /// Host RAM page-locked for offloaded weights ([`Knobs::pinned`]), 0 without pinning.
    pub fn pinned_host(&self) -> u64 {
        if self.knobs.pinned {
            self.offloaded()
        } else {
            0
        }
    }

    /// Allocated by PyTorch right now.
    pub fn allocated(&self) -> u64 {
        self.resident() + self.active
    }

    /// Reserved by PyTorch's caching allocator.
    pub fn reserved(&self) -> u64 {
        self.allocated() + self.cached
    }

    /// Free device memory as CUDA reports it.
    pub fn free(&self) -> u64 {
        self.total
            .saturating_sub(NON_TORCH_OVERHEAD)
            .saturating_sub(self.leaked)
            .saturating_sub(self.reserved())
    }

    /// Names of loaded models, most recently used last.
    pub fn loaded_models(&self) -> Vec<(String, u64)> {
        let mut v = self.loaded.clone();
        v.sort_by_key(|l| l.last_used);
        v.into_iter().map(|l| (l.key, l.bytes)).collect()
    }

    /// Unloads everything (`/free`, or after an OOM).
    pub(crate) fn unload_all(&mut self) {
        self.loaded.clear();
        self.active = 0;
        self.cached = 0;
    }

    /// Unloads one model (after it failed to load or run).
    pub(super) fn unload(&mut self, key: &str) {
        self.loaded.retain(|l| l.key != key);
    }

    /// End of a node: activations are freed, the allocator keeps a little cached.
    pub(crate) fn finish_node(&mut self) {
        self.cached = if self.knobs.expandable_segments {
            (self.active / 64).min(32 * MIB)
        } else {
            (self.active / 8).min(512 * MIB)
        };
        self.active = 0;
    }

    /// End of a prompt: `soft_empty_cache` returns cached blocks.
    pub(crate) fn empty_cache(&mut self) {
        self.cached = 0;
        self.active = 0;
    }

    pub(super) fn touch(&mut self, key: &str) -> Option<u64> {
        self.clock += 1;
        let clock = self.clock;
        self.loaded.iter_mut().find(|l| l.key == key).map(|l| {
            l.last_used = clock;
            l.bytes
        })
    }

    /// Frees least-recently-used models other than `keep` until `need` bytes are free.
    pub(super) fn make_room(&mut self, need: u64, keep: &str) {
        self.cached = 0;
        while self.budget().saturating_sub(self.allocated()) < need {
            let victim = self
                .loaded
                .iter()
                .enumerate()
                .filter(|(_, l)| l.key != keep)
                .min_by_key(|(_, l)| l.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    self.loaded.remove(i);
                }
                None => break,
            }
        }
    }

    pub(super) fn set_loaded(&mut self, key: &str, bytes: u64, offloaded: u64) {
        self.clock += 1;
        let clock = self.clock;
        if let Some(l) = self.loaded.iter_mut().find(|l| l.key == key) {
            l.bytes = bytes;
            l.offloaded = offloaded;
            l.last_used = clock;
        } else {
            self.loaded.push(Loaded {
                key: key.to_string(),
                bytes,
                offloaded,
                last_used: clock,
            });
        }
    }
    /// Allocates `need` bytes of working memory in `chunks` equal pieces; on failure returns
    /// the failing chunk size (the "Tried to allocate" of the message) and leaves the
    /// successful chunks allocated, as a real failure would.
    pub(super) fn try_alloc(&mut self, need: u64, chunks: u64) -> Result<(), u64> {
        let chunk = need.div_ceil(chunks.max(1)).max(1);
        let mut left = need;
        while left > 0 {
            let this = chunk.min(left);
            if self.allocated() + self.cached + this > self.budget() {
                return Err(this);
            }
            self.active += this;
            left -= this;
        }
        Ok(())
    }

    /// Loads a model for use: returns (resident bytes, partial). `reserve` is the working
    /// memory the node will need; the launch flags add to it ([`Knobs::extra_reserve`],
    /// [`Knobs::headroom`]) and may let any model load partially ([`Knobs::dynamic`],
    /// [`Knobs::novram`]).
    pub(super) fn load(
        &mut self,
        class: Option<&str>,
        key: &str,
        want: u64,
        reserve: u64,
        partial_ok: bool,
    ) -> (u64, bool) {
        if let Some(have) = self.touch(key) {
            if have >= want {
                return (have, false);
            }
        }
        let dynamic = self.knobs.dynamic;
        let reserve =
            reserve + self.knobs.extra_reserve + if dynamic { self.knobs.headroom } else { 0 };
        let partial_ok = partial_ok || dynamic || self.knobs.novram;
        self.make_room(want + reserve, key);
        let others = self.resident() - self.touch(key).unwrap_or(0);
        let room = self.budget().saturating_sub(others + reserve);
        let mb = |b: u64| b as f64 / MIB as f64;
        let (resident, partial) = if want <= room || !partial_ok {
            (want, false)
        } else {
            (room, true)
        };
        self.set_loaded(key, resident, want - resident);
        if let Some(class) = class {
            self.console.push(format!("Requested to load {class}"));
            self.console.push(if dynamic {
                format!(
                    "Model {class} prepared for dynamic VRAM loading. {}MB Staged. 0 patches attached.",
                    want / MIB
                )
            } else if partial {
                format!(
                    "loaded partially; {:.2} MB usable, {:.2} MB loaded, {:.2} MB offloaded, lowvram patches: 0",
                    mb(room),
                    mb(resident),
                    mb(want - resident)
                )
            } else {
                format!("loaded completely {} {} True", mb(room), mb(want))
            });
        }
        (resident, partial)
    }
}
