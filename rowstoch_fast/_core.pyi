"""Type stub of the compiled kernels (csrc/bindings.cpp, csrc/passes.cpp)."""

from typing import Any, Literal, Sequence, overload

import numpy as np
from numpy.typing import NDArray

def has_openmp() -> bool: ...
def build_info() -> dict[str, object]: ...
def get_num_threads() -> int: ...
def set_num_threads(threads: int) -> None: ...
def set_adaptive_threads(enabled: bool) -> None: ...
def adaptive_threads() -> dict[str, object]: ...
def get_simd_width() -> int: ...
def set_simd_width(width: int) -> None: ...
def simd_widths() -> list[int]: ...
def mix(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    X: NDArray[np.floating],
    out: NDArray[np.floating] | None = None,
    check_indices: bool = True,
    ncols: int = -1,
) -> NDArray[np.floating]: ...
def mix_lossy(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    X: NDArray[np.floating],
    out: NDArray[np.floating] | None = None,
    seed: int = 0,
    t: int = 0,
    r: int = 0,
    p: float | NDArray[np.floating] = 0.0,
    renormalise: bool = True,
    awake: NDArray[np.bool_] | None = None,
    row_ids: NDArray[np.int64] | None = None,
    col_ids: NDArray[np.int64] | None = None,
    ncols: int = -1,
    bad: NDArray[np.uint8] | None = None,
    check_indices: bool = True,
    symmetric: bool = False,
    stacked: bool = False,
    messages: NDArray[np.floating] | None = None,
) -> NDArray[np.floating]: ...
def ge_advance(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    bad: NDArray[np.uint8],
    seed: int,
    from_: int,
    to: int,
    p_bad: float,
    p_recover: float,
    init: bool = False,
    row_ids: NDArray[np.int64] | None = None,
    col_ids: NDArray[np.int64] | None = None,
) -> None: ...
def compress(
    X: NDArray[np.floating],
    out: NDArray[np.floating],
    method: int,
    L: int,
    param: int | NDArray[np.integer] | Sequence[int],
    sigma: float | NDArray[np.floating] | Sequence[float],
    unbiased: bool,
    seed: int,
    t: int,
    r: int,
    row_ids: NDArray[np.int64] | None = None,
    own: NDArray[np.floating] | None = None,
) -> NDArray[np.floating]: ...
def delay_ages(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    seed: int,
    t: int,
    r: int,
    max_delay: int,
    fixed: bool = False,
    row_ids: NDArray[np.int64] | None = None,
    col_ids: NDArray[np.int64] | None = None,
    layout: tuple[int, int, int] | tuple[int, int, int, bool] | None = None,
) -> NDArray[np.int32] | NDArray[np.int64]: ...
def mix_delayed(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    H: NDArray[np.floating],
    out: NDArray[np.floating],
    seed: int,
    t: int,
    r: int,
    max_delay: int,
    fixed: bool,
    layout: tuple[int, int, int] | tuple[int, int, int, bool],
    row_ids: NDArray[np.int64] | None = None,
    col_ids: NDArray[np.int64] | None = None,
    loss_seed: int = 0,
    p: float = 0.0,
    renormalise: bool = True,
    awake: NDArray[np.bool_] | NDArray[np.uint8] | None = None,
    bad: NDArray[np.bool_] | NDArray[np.uint8] | None = None,
    symmetric: bool = False,
) -> NDArray[np.floating]: ...
def link_noise(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    seed: int,
    t: int,
    r: int,
    w: int,
    dtype: object = ...,
    ages: NDArray[np.int32] | None = None,
    row_ids: NDArray[np.int64] | None = None,
    col_ids: NDArray[np.int64] | None = None,
) -> NDArray[np.floating]: ...
def lost_links(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    seed: int,
    t: int,
    r: int,
    p: float | NDArray[np.floating],
    row_ids: NDArray[np.int64] | None = None,
    col_ids: NDArray[np.int64] | None = None,
    bad: NDArray[np.uint8] | NDArray[np.bool_] | None = None,
) -> NDArray[np.uint8]: ...
def running_sums(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    arrived: NDArray[np.bool_] | NDArray[np.uint8],
    blocks: Sequence[
        tuple[
            NDArray[np.floating],
            NDArray[np.floating],
            NDArray[np.floating],
            NDArray[np.floating],
            NDArray[np.uint8] | NDArray[np.bool_],
            NDArray[np.uint8] | NDArray[np.bool_],
        ]
    ],
    check_indices: bool = True,
    ncols: int = -1,
) -> None: ...
def running_sums_compact(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    arrived: NDArray[np.bool_] | NDArray[np.uint8],
    blocks: Sequence[
        tuple[
            NDArray[np.floating],
            NDArray[np.floating],
            NDArray[np.int64],
            NDArray[np.floating],
            NDArray[np.int64],
            NDArray[np.floating],
        ]
    ],
    check_indices: bool = True,
    ncols: int = -1,
    draw: tuple[int, int, int, float] | None = None,
) -> int: ...
def mix_power(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    X: NDArray[np.floating],
    R: int,
    out: NDArray[np.floating] | None = None,
    work: NDArray[np.floating] | None = None,
    check_indices: bool = True,
) -> NDArray[np.floating]: ...
def gt_y_phase(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    R: int,
    lr: float,
    x: NDArray[np.floating],
    y: NDArray[np.floating],
    g_new: NDArray[np.floating],
    g_old: NDArray[np.floating],
    s_new: NDArray[np.floating],
    s_old: NDArray[np.floating],
    y_out: NDArray[np.floating],
    xw: NDArray[np.floating],
    psi: NDArray[np.floating],
    work: NDArray[np.floating],
    check_indices: bool = True,
) -> bool: ...
def combine(out: NDArray[np.floating], coefs: list[float | NDArray[np.floating]], blocks: list[NDArray[np.floating]]) -> bool: ...
def copy_rows(src: NDArray[Any], dst: NDArray[Any]) -> None: ...
def first_nonfinite(X: NDArray[np.floating]) -> int: ...
def sample_rows(
    table: NDArray[np.floating], idx: NDArray[np.integer], block: NDArray[np.floating], put: bool
) -> None: ...
def draw_samples(
    prefix: int, rep_ids: NDArray[np.int64], node_ids: NDArray[np.int64], key: int, samples: int,
    all_nodes: bool = False,
) -> NDArray[np.int64]: ...
def numpy_minibatches(
    entropy: NDArray[np.uint64], n: int, M: int, batches: int, batch: int, own: NDArray[np.int64]
) -> NDArray[np.int64]: ...
def numpy_pcg64_states(entropy: NDArray[np.uint64]) -> NDArray[np.uint64]: ...
def diag_powers(
    indptr: NDArray[np.integer],
    indices: NDArray[np.integer],
    data: NDArray[np.floating],
    stride: int,
    n_records: int,
    block: int = 256,
    check_indices: bool = True,
) -> tuple[NDArray[np.floating], int]: ...
def logistic_grad(
    H: NDArray[np.floating],
    Y: NDArray[np.floating],
    n: int,
    rho: float,
    X: NDArray[np.floating],
    batch: int,
    batches: int,
    seed: int,
    iteration: int,
    rep_offset: int = 0,
    nodes: NDArray[np.int64] | None = None,
    out: NDArray[np.floating] | None = None,
    rep_period: int = 0,
) -> NDArray[np.floating]: ...
@overload
def logistic_full_grad(
    H: NDArray[np.floating],
    Y: NDArray[np.floating],
    n: int,
    rho: float,
    X: NDArray[np.floating],
    nodes: NDArray[np.int64] | None = None,
    with_loss: Literal[False] = False,
) -> NDArray[np.floating]: ...
@overload
def logistic_full_grad(
    H: NDArray[np.floating],
    Y: NDArray[np.floating],
    n: int,
    rho: float,
    X: NDArray[np.floating],
    nodes: NDArray[np.int64] | None,
    with_loss: Literal[True],
) -> tuple[NDArray[np.floating], NDArray[np.floating]]: ...
@overload
def least_squares_grad(
    H: NDArray[np.floating],
    Y: NDArray[np.floating],
    X: NDArray[np.floating],
    nodes: NDArray[np.int64] | None = None,
    with_loss: Literal[False] = False,
) -> NDArray[np.floating]: ...
@overload
def least_squares_grad(
    H: NDArray[np.floating],
    Y: NDArray[np.floating],
    X: NDArray[np.floating],
    nodes: NDArray[np.int64] | None,
    with_loss: Literal[True],
) -> tuple[NDArray[np.floating], NDArray[np.floating]]: ...
