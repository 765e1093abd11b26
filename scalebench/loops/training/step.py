"""One measured training step, the set-up of the model it trains, and 'auto' checkpointing.

A step is three profiler steps: ``forward`` (the unrolled network on this rank's patches and
the loss), ``backward`` (gradients, then one all-reduce of the gradients this rank holds only
in part, issued and timed here) and ``optimizer`` (gradient norm, clipping, update). Each
reports its time, its communication and its peak memory; the step adds the loss, the
gradient norm (before clipping), the activations saved for the backward pass and the
throughput.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path

import torch
from torch import nn

from scalebench.denoisers.catalog import DENOISERS
from scalebench.denoisers.tiles import dealt_tiles, is_tiled
from scalebench.denoisers.tiling import BatchDealtProcessing, WindowTiling
from scalebench.loops.training.network import UnrolledPGD, build_network
from scalebench.loops.training.patches import TrainingData
from scalebench.rank.context import TimedContext
from scalebench.rank.names import TRAINING_STEPS
from scalebench.rank.profiling import MIB, StepProfiler

CHECKPOINTING_PREFERENCE = ("none", "tile_batch", "stage")  # least recomputation first
_STATUS = Path("/proc/self/status")


def memory_in_use_mib(device: torch.device) -> dict[str, float]:
    """What the process holds now: resident set (Linux VmRSS) and, on CUDA, allocated."""
    held = {}
    for line in _STATUS.read_text().splitlines() if _STATUS.exists() else []:
        if line.startswith("VmRSS:"):
            held["host_rss_mib"] = int(line.split()[1]) * 1024 / MIB
    if device.type == "cuda":
        held["cuda_alloc_mib"] = torch.cuda.memory_allocated(device) / MIB
    return held


class _AllTilesHere:
    """Context of a tile split whose only rank is this process (data-parallel or single
    runs: each rank tiles its own patches)."""

    use_dist, rank, world_size = False, 0, 1

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def local_indices(self, num_items: int) -> list[int]:
        return list(range(num_items))

    def all_reduce(self, x: torch.Tensor, **_) -> torch.Tensor:
        return x


def build_model(params: dict, data: TrainingData, context: TimedContext) -> UnrolledPGD:
    """The seeded model of the run, tiled (and split across ranks) as configured."""
    shape = tuple(data.validation.x_true.shape[1:])
    network = build_network(params["denoiser"], shape[0], len(shape) - 1,
                            params["denoiser_width"], params["denoiser_depth"],
                            params["seed"], context.device)
    step_size = params["init_step_size"] or 1.0 / data.lipschitz
    model = UnrolledPGD(network, DENOISERS[params["denoiser"]].blind, params["num_stages"],
                        step_size, params["init_sigma"], data.lipschitz).to(context.device)
    if is_tiled(shape[1:], params["tile_size"]):
        spatial = params["distribution"] == "spatial"
        strategy = WindowTiling((1, *shape), params["tile_size"], params["tile_overlap"],
                                DENOISERS[params["denoiser"]].size_multiple)
        tiles = BatchDealtProcessing(
            context if spatial else _AllTilesHere(context.device), model.apply_network,
            strategy=strategy, max_batch_size=params["tiles_per_batch"] or None,
            checkpoint_batches="never")
        model.split_tiles(tiles, context if spatial else None)
    return model


def choose_checkpointing(model: UnrolledPGD, data: TrainingData, params: dict,
                         indices: range) -> tuple[str, dict[str, float]]:
    """'auto': the mode with least recomputation whose activation memory fits the budget
    (else the leanest), from the activations one stage measurably saves on a real batch.

    Estimates (MiB) for K stages, S the activations of one stage's network without
    checkpointing (the physics' few image-sized tensors left out):
    none K*S; tile_batch K*S_tiles + S/batches (one tile batch recomputed at a time);
    stage K*input + S (one stage recomputed at a time).
    """
    _, y = data.batch(0, indices)
    x0 = data.physics.A_adjoint(y) / data.lipschitz
    modes = ("none", "tile_batch") if model.tiles is not None else ("none",)
    per_stage = {}
    for mode in modes:
        set_checkpointing(model, mode)
        with torch.enable_grad(), SavedActivations(model) as saved:
            model.denoise(x0.requires_grad_(), model.sigmas[0])
        per_stage[mode] = saved.mib
    stages, full = params["num_stages"], per_stage["none"]
    estimates = {"none": stages * full,
                 "stage": stages * x0.numel() * x0.element_size() / MIB + full}
    if model.tiles is not None:
        ranks = model.context.world_size if model.context is not None else 1
        local = len(dealt_tiles(model.tiles.strategy.get_num_patches(),
                                params["tiles_per_batch"], 0, ranks))  # rank 0 has most
        batches = math.ceil(local / (params["tiles_per_batch"] or local))
        estimates["tile_batch"] = stages * per_stage["tile_batch"] + full / batches
    budget = params["memory_budget_mib"]
    fitting = [m for m in CHECKPOINTING_PREFERENCE if m in estimates and estimates[m] <= budget]
    return (fitting[0] if fitting else min(estimates, key=estimates.get)), estimates


def set_checkpointing(model: UnrolledPGD, mode: str) -> None:
    """Apply 'none', 'stage' or 'tile_batch' checkpointing to ``model``."""
    model.checkpoint_stages = mode == "stage"
    if model.tiles is not None:
        model.tiles.checkpoint_batches = "always" if mode == "tile_batch" else "never"


class SavedActivations:
    """Bytes the autograd graph keeps for the backward pass (distinct storages, parameters
    left out), counted while the block runs. Physics whose adjoint goes through torch.func
    (deepinv's ``Tomography``) refuse saved-tensor hooks: see ``physics_allows_counting``."""

    def __init__(self, model: nn.Module) -> None:
        self.parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.storages: dict[int, int] = {}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in self.parameters:
            self.storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    def __enter__(self) -> SavedActivations:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._hooks.__exit__(*exc_info)

    @property
    def mib(self) -> float:
        return sum(self.storages.values()) / MIB


def physics_allows_counting(data: TrainingData) -> bool:
    """Whether the physics runs under saved-tensor hooks (torch.func refuses them)."""
    x = data.validation.x_true.clone().requires_grad_()
    try:
        with torch.enable_grad(), SavedActivations(nn.Module()):
            data.physics.A_adjoint(data.physics.A(x))
    except RuntimeError:
        return False
    return True


class Trainer:
    """The training state; ``iterate()`` performs one profiled step."""

    def __init__(self, model: UnrolledPGD, data: TrainingData, params: dict,
                 context: TimedContext, profiler: StepProfiler) -> None:
        self.model, self.data, self.params = model, data, params
        self.context, self.profiler = context, profiler
        self.step_index = 0
        self.loss = math.nan
        self.grad_norm = math.nan
        self.saved_activations_mib = math.nan
        self.memory_before: dict[str, float] = {}
        batch, ranks = params["batch_size"], context.world_size
        data_parallel = params["distribution"] == "data"
        share = batch // ranks if data_parallel else batch
        first = context.rank * share if data_parallel else 0
        self.indices = range(first, first + share)
        network, stage = model.split_parameters()
        # Gradients held only in part by each rank, summed by one all-reduce per step.
        self.partial = [*network, *stage] if data_parallel else \
            network if params["distribution"] == "spatial" else []
        groups = [{"params": network, "lr": params["lr"]},
                  {"params": stage, "lr": params["lr_stage"]}]
        self.optimizer = torch.optim.Adam(groups) if params["optimizer"] == "adam" else \
            torch.optim.SGD(groups)
        self.pixels = batch * math.prod(data.validation.x_true.shape[2:])
        self.loss_is_partial = data_parallel
        # Operators that build their adjoint per batch shape (deepinv's Tomography, through
        # torch.func) build it here, outside the counting hooks that torch.func refuses.
        with torch.no_grad():
            data.physics.A_adjoint(data.batch(0, self.indices)[1])
        self.counting = physics_allows_counting(data)

    def iterate(self) -> None:
        x, y = self.data.batch(self.step_index, self.indices)
        before = memory_in_use_mib(self.context.device)
        scale = 1.0 / (self.pixels * x.shape[1])  # mean over the global batch
        saved = SavedActivations(self.model)
        with self.profiler.step("forward"), saved if self.counting else nullcontext():
            loss = torch.sum((self.model(y, self.data.physics) - x) ** 2) * scale
        with self.profiler.step("backward"):
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.loss = self._sum_partial_gradients(loss.detach())
        with self.profiler.step("optimizer"):
            self.grad_norm = self._clip()
            self.optimizer.step()
        self.saved_activations_mib = saved.mib if self.counting else math.nan
        self.memory_before = before
        self.step_index += 1

    def _sum_partial_gradients(self, loss: torch.Tensor) -> float:
        """All-reduce the partial gradients (and the loss when it is partial) in one bucket."""
        if not self.context.use_dist or not self.partial:
            return loss.item()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.partial]
        extra = [loss.reshape(1)] if self.loss_is_partial else []
        bucket = torch.cat([g.reshape(-1) for g in grads] + extra)
        bucket = self.context.all_reduce(bucket)
        offset = 0
        for p in self.partial:
            p.grad = bucket[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        return bucket[-1].item() if self.loss_is_partial else loss.item()

    def _clip(self) -> float:
        parameters = [p for group in self.optimizer.param_groups for p in group["params"]]
        limit = self.params["clip_grad_norm"]
        if limit > 0:
            return float(torch.nn.utils.clip_grad_norm_(parameters, limit))
        grads = [p.grad for p in parameters if p.grad is not None]
        return float(torch.nn.utils.get_total_norm(grads))

    def figures(self) -> dict[str, float]:
        """The latest step's figures: per-step times, memory, loss, norm, throughput."""
        last = self.profiler.last
        if not last:
            return {}
        step_time = sum(last[f"{name}_time_s"] for name in TRAINING_STEPS)
        peaks = [key for key in last if "_peak_" in key]
        figures = {**last, "step_time_s": step_time, "loss": self.loss,
                   "grad_norm": self.grad_norm,
                   "saved_activations_mib": self.saved_activations_mib,
                   "throughput_pixels_per_s": self.pixels / step_time}
        for kind in {key.split("_peak_", 1)[1] for key in peaks}:
            figures[f"step_peak_{kind}"] = max(last[f"{n}_peak_{kind}"] for n in TRAINING_STEPS)
            if kind in self.memory_before:
                figures[f"step_peak_increase_{kind}"] = \
                    figures[f"step_peak_{kind}"] - self.memory_before[kind]
        return figures

    def parameters_vector(self) -> torch.Tensor:
        """Every trained parameter, flattened in a fixed order (its digest names the state)."""
        return torch.cat([p.detach().reshape(-1) for p in self.model.parameters()])
