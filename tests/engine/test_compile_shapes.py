"""--epochs --compile times the same static full-batch graph as --steps (issue 19, item 8).

An epoch's partial last batch used to reach the compiled model in warm-up; dynamo's automatic
dynamic shapes then recompiled the frame with a symbolic batch dimension, and every later full
batch ran that symbolic graph. These tests run real cases through the runner with a recording
dynamo back end: each graph dynamo hands it is recorded (symbolic or static, and its input
shapes), and each call says which graph ran. The back end runs the graphs eagerly, not through
inductor: which graph dynamo builds and picks (automatic dynamic shapes, guards, the cache) is
decided before any back end sees it, so this is the same decision inductor would be given, at a
fraction of the compile time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch._dynamo

from accelbench.devices import DeviceSet
from accelbench.engine.case import plan
from accelbench.engine.measure_case import run_case
from accelbench.options import RunOptions, StopRule

BACKEND = "accelbench-test-recorder"
#: mnist at size tiny: 64 training and 32 evaluation samples; 12 a batch leaves a partial batch.
BATCH = 12


@dataclass
class Graph:
    symbolic: bool
    #: Shapes of the tensor inputs (parameters and images): what the graph is specialised to.
    shapes: tuple[tuple[int, ...], ...]
    code: str


@dataclass
class Recorder:
    graphs: list[Graph] = field(default_factory=list)
    #: (graph index, batch size of the images) per call of a compiled graph.
    calls: list[tuple[int, int]] = field(default_factory=list)

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        symbolic = any(isinstance(value, torch.SymInt) or (
            isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape))
            for value in example_inputs)
        shapes = tuple(tuple(int(s) if not isinstance(s, torch.SymInt) else -1 for s in value.shape)
                       for value in example_inputs if isinstance(value, torch.Tensor))
        index = len(self.graphs)
        self.graphs.append(Graph(symbolic, shapes, gm.code))

        def run(*args: Any) -> Any:
            images = next((a for a in args if isinstance(a, torch.Tensor)
                           and tuple(a.shape[1:]) == (1, 28, 28)), None)
            self.calls.append((index, -1 if images is None else int(images.shape[0])))
            return gm.forward(*args)

        return run

    def full_batch_graphs(self) -> set[int]:
        return {graph for graph, size in self.calls if size == BATCH}


RECORDER = Recorder()
if BACKEND not in torch._dynamo.list_backends(exclude_tags=()):
    torch._dynamo.register_backend(lambda gm, inputs: RECORDER.backend(gm, inputs), name=BACKEND)


def run(mode: str, stop: StopRule, reset: bool = True) -> Recorder:
    if reset:
        torch._dynamo.reset()  # dynamo's caches and frame states are per code object, process-wide
    RECORDER.graphs.clear()
    RECORDER.calls.clear()
    options = RunOptions(workloads=("mnist",), device="cpu", modes=(mode,), size="tiny", stop=stop,
                         warmup_steps=1, isolation="none", batch_size=BATCH,
                         compile_backends=(BACKEND,))
    (case,) = plan(options, DeviceSet.current())
    result = run_case(case, options)
    assert result.ok, result.error
    return Recorder(list(RECORDER.graphs), list(RECORDER.calls))


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_epochs_and_steps_time_the_same_static_full_batch_graph(mode: str) -> None:
    epochs = run(mode, StopRule("epochs", 1))
    partial = (64 if mode == "train" else 32) % BATCH
    assert {size for _, size in epochs.calls} == {BATCH, partial}  # both shapes really ran
    # No graph was compiled with a symbolic batch dimension (the defect: the partial batch made
    # dynamo recompile the frame dynamically, and the full batches ran that graph).
    assert not any(graph.symbolic for graph in epochs.graphs), epochs.graphs
    full = epochs.full_batch_graphs()
    assert len(full) == 1, epochs.calls  # every full batch, before and after the partial one
    (full_graph,) = full
    assert (BATCH, 1, 28, 28) in epochs.graphs[full_graph].shapes
    # The partial batch has a static graph of its own.
    assert {graph for graph, size in epochs.calls if size == partial} != full

    steps = run(mode, StopRule("steps", 3))
    assert len(steps.graphs) == 1 and not steps.graphs[0].symbolic
    assert steps.graphs[0].shapes == epochs.graphs[full_graph].shapes
    assert steps.graphs[0].code == epochs.graphs[full_graph].code


def test_a_later_case_in_the_same_process_compiles_its_full_batch_static() -> None:
    """Dynamo remembers the sizes a function met, process-wide: after a training case's partial
    batch, an evaluation case of the same model code in the same process (--isolation none) must
    still compile its full batch static (the batch dimension is marked static)."""
    run("train", StopRule("epochs", 1))
    later = run("eval", StopRule("steps", 3), reset=False)
    assert later.graphs and not any(graph.symbolic for graph in later.graphs), later.graphs
    assert {size for _, size in later.calls} == {BATCH}


class _Broken(torch.nn.Module):
    """A graph break between two layers: the second frame's input is an activation, not the
    batch the step was given."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x).relu()
        torch._dynamo.graph_break()
        return self.b(y)


def test_the_partial_batch_stays_static_past_a_graph_break() -> None:
    """Why the partial batch runs with automatic dynamic shapes off rather than with its input
    marked static: the frame after a graph break would still turn symbolic."""
    from accelbench.engine.steps import shape_policy

    torch._dynamo.reset()
    recorder = Recorder()
    model = torch.compile(_Broken(), backend=recorder.backend)
    for size in (4, 4, 3, 4, 4):
        batch = (torch.randn(size, 8),)
        with shape_policy(batch, static_batch=4):
            model(batch[0]).sum().backward()
    assert len(recorder.graphs) == 4 and not any(graph.symbolic for graph in recorder.graphs)
    # The full batches after the partial one run the first two graphs again (both frames).
    assert [graph for graph, _ in recorder.calls[-4:]] == [0, 1, 0, 1]
