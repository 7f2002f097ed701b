"""Obviously-correct dense NumPy/SciPy transcriptions of the paper's equations.

Every fast path of the package is tested against these. They favour
readability over speed: dense ``n x n`` matrices, Python loops, no caching.
Equation numbers refer to the ICML 2025 paper.

Each algorithm of :data:`rowstoch_fast.algorithms.REGISTRY` has its twin here, registered with
:func:`twin` under the algorithm's name: ``tests/test_algorithms.py`` runs every registered algorithm against
its twin (and fails for an algorithm without one). A twin takes keyword arguments named as the algorithm's
constructor names them (``A``, ``C`` as dense arrays or callables ``t -> A_t``, ``n``), ``x0``, ``lr``,
``grad_fn``, ``T`` and, for a multi-round method, ``R``; it returns the models ``x^(t)``, ``t = 0..T``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as la

#: The dense twin of every algorithm, by its registry name (see the module's docstring).
TWINS = {}


def _registrar(table):
    """A decorator factory: ``@registrar(name)`` puts the function in ``table`` under ``name``."""
    def by_name(name):
        def register(f):
            table[name] = f
            return f
        return register
    return by_name


def twin(name):
    """Register the decorated function as the dense twin of the algorithm ``name``."""
    return _registrar(TWINS)(name)


def mix(A, X):
    """A-protocol (eq. 2): ``A X``."""
    return np.asarray(A) @ np.asarray(X)


def mix_power(A, X, R):
    """``A^R X`` by repeated products."""
    Y = np.array(X, dtype=np.result_type(A, X))
    for _ in range(R):
        Y = np.asarray(A) @ Y
    return Y


def perron(A):
    """Left Perron vector: ``pi^T A = pi^T``, ``sum(pi) = 1`` (Proposition 1), via ``scipy.linalg.eig``."""
    w, vl = la.eig(np.asarray(A, dtype=np.float64), left=True, right=False)
    k = int(np.argmin(np.abs(w - 1.0)))
    pi = np.abs(vl[:, k].real)
    return pi / pi.sum()


def beta(A, pi=None):
    """``||A - 1 pi^T||_pi = ||Pi^{1/2} (A - 1 pi^T) Pi^{-1/2}||_2`` (Section 2.2)."""
    A = np.asarray(A, dtype=np.float64)
    pi = perron(A) if pi is None else pi
    P = np.diag(np.sqrt(pi))
    Pinv = np.diag(1.0 / np.sqrt(pi))
    return float(np.linalg.norm(P @ (A - np.outer(np.ones(len(pi)), pi)) @ Pinv, 2))


def kappa(pi):
    """``max(pi) / min(pi)``."""
    return float(np.max(pi) / np.min(pi))


def diag_powers(A, K, stride=1):
    """Rows ``diag(A^(m * stride))``, ``m = 0..K``, by the paper's ``V_{k+1} = A V_k`` with ``V_0 = I``; ``A``
    may be a callable ``k -> A_k`` (a time-varying network: ``V_{k+1} = A_k V_k``)."""
    A_of = _of(A)
    V = np.eye(A_of(0).shape[0])
    out, k = [np.diag(V).copy()], 0
    for _ in range(K):
        for _ in range(stride):
            V = A_of(k) @ V
            k += 1
        out.append(np.diag(V).copy())
    return np.array(out)


def a_protocol(A, Z, K):
    """Iterates ``z^(k) = A^k z``, ``k = 0..K`` (eq. 2)."""
    A = np.asarray(A, dtype=np.float64)
    zs = [np.array(Z, dtype=np.float64)]
    for _ in range(K):
        zs.append(A @ zs[-1])
    return np.array(zs)


def pull_diag(A, Z, K):
    """Pull-Diag protocol (eq. 5): ``V_k = A^k``, ``D_k = Diag(n V_k)``, ``z^(k) = V_k D_k^{-1} z`` for ``k = 1..K``.

    ``z^(0) = z`` (the initial values).
    """
    A = np.asarray(A, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    n = A.shape[0]
    V = np.eye(n)
    zs = [Z.copy()]
    for _ in range(K):
        V = A @ V
        D = np.diag(n * np.diag(V))
        zs.append(V @ np.linalg.solve(D, Z))
    return np.array(zs)


def pull_diag_gt(A, x0, lr, grad_fn, T, R=1):
    """(MG-)Pull-Diag-GT, eq. (7) for ``R = 1`` and eq. (12) in general, dense.

    ``x^(t+1) = A^R (x^(t) - lr y^(t))``,
    ``y^(t+1) = A^R (y^(t) + D_{t+1}^{-1} g^(t+1) - D_t^{-1} g^(t))``,
    ``D_t = Diag(A^(tR))`` (``D_0 = I``), ``y^(0) = g^(0) = grad_fn(x^(0))``.

    Returns the lists of iterates ``x^(t)`` and ``y^(t)``, ``t = 0..T``.
    """
    AR = np.linalg.matrix_power(np.asarray(A, dtype=np.float64), R)
    return pull_diag_gt_varying(lambda t: AR, x0, lr, grad_fn, T)  # a static network: A_t = A^R


@twin("pull-diag-gt")
def pull_diag_gt_models(A, x0, lr, grad_fn, T, R=1):
    """:func:`pull_diag_gt`'s models ``x^(t)`` alone (its registered twin)."""
    return pull_diag_gt(A, x0, lr, grad_fn, T, R)[0]


def pull_diag_gt_varying(A_of, x0, lr, grad_fn, T):
    """Pull-Diag-GT on a time-varying network, dense: ``A_of(t)`` is the matrix of iteration ``t`` (the
    product of its R round matrices, issue 12's semantics).

    ``x^(t+1) = A_t (x^(t) - lr y^(t))``, ``V_{t+1} = A_t V_t`` (``V_0 = I``), ``D_t = Diag(V_t)``,
    ``y^(t+1) = A_t (y^(t) + D_{t+1}^{-1} g^(t+1) - D_t^{-1} g^(t))``.

    Returns the lists of iterates ``x^(t)`` and ``y^(t)``, ``t = 0..T``.
    """
    x = np.array(x0, dtype=np.float64)
    g = np.asarray(grad_fn(x), dtype=np.float64)
    y = g.copy()
    V = np.eye(x.shape[0])
    xs, ys = [x.copy()], [y.copy()]
    for t in range(T):
        At = np.asarray(A_of(t), dtype=np.float64)
        D_old = np.diag(V).copy()
        x = At @ (x - lr * y)
        V = At @ V
        D_new = np.diag(V).copy()
        g_new = np.asarray(grad_fn(x), dtype=np.float64)
        y = At @ (y + g_new / D_new[:, None] - g / D_old[:, None])
        g = g_new
        xs.append(x.copy())
        ys.append(y.copy())
    return xs, ys


def gilbert_elliott_states(seed, rows, cols, t, p_bad, p_recover):
    """The bad (True) / good state at iteration ``t`` of the Gilbert-Elliott chain of every edge ``cols[k] ->
    rows[k]`` (``rowstoch_fast.network.Lossy(model="gilbert-elliott")``): the stationary draw
    ``uniform_hash(seed, 2^62, 0, i, j) < p_bad / (p_bad + p_recover)``, then for ``s = 0 .. t`` with
    ``v = uniform_hash(seed, 2^61 + s, 0, i, j)``: bad -> good when ``v < p_recover``, good -> bad when
    ``v < p_bad``."""
    from .network import uniform_hash

    state = uniform_hash(seed, 2**62, 0, rows, cols) < p_bad / (p_bad + p_recover)
    for s in range(t + 1):
        v = uniform_hash(seed, 2**61 + s, 0, rows, cols)
        state = np.where(state, v >= p_recover, v < p_bad)
    return state


def lost_links(indptr, indices, seed, t, r, p, row_ids=None, col_ids=None, bad=None):
    """Which stored entries' messages (``j -> i``) round ``r`` of iteration ``t`` loses: ``uniform_hash(seed, t, r,
    i, j) < p`` on global ids (``p`` one number, or one per node: the sender ``j``'s ``p[j]``), gated by the
    Gilbert-Elliott states ``bad``, never a self loop."""
    from ._hashing import uniform_hash

    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    cols = np.asarray(indices, dtype=np.int64)
    if row_ids is not None:
        rows, cols = np.asarray(row_ids)[rows], np.asarray(col_ids)[cols]
    lost = uniform_hash(seed, t, r, rows, cols) < (p if np.ndim(p) == 0 else np.asarray(p)[cols])
    if bad is not None:
        lost &= np.asarray(bad).astype(bool)
    return lost & (rows != cols)


def lossy_round(indptr, indices, data, X, seed, t, r, p, renormalise=True, awake=None, symmetric=False, bad=None):
    """One gossip round of ``rowstoch_fast.network.Lossy`` / ``Sleepy`` on a CSR matrix, row by row in Python:
    the message ``j -> i`` (``j != i``) is lost when ``uniform_hash(seed, t, r, i, j) < p`` or when ``j``
    sleeps; a sleeping ``i`` keeps ``x_i``. A row that lost something and renormalises is
    ``sum_arrived a_ij x_j / sum_arrived a_ij`` (``x_i`` if nothing arrived), else ``sum_arrived a_ij x_j``
    (``p`` one number, or one per node: a message is lost with its sender's ``p[j]``);
    every sum in CSR order, one rounding per operation in the dtype of ``X`` (what the compiled pass does).
    ``symmetric`` (the undirected rule, :meth:`rowstoch_fast.network.Network.undirected`): the link ``i - j`` is
    used only when ``j -> i`` and ``i -> j`` (``uniform_hash(seed, t, r, j, i)``) both arrived and both ends are
    awake, and ``y_i = sum_used w_ij x_j + (sum_unused w_ij) x_i`` (the unused weight summed in CSR order, its
    product added last). ``bad``: Gilbert-Elliott gates per stored entry (a message is lost only where its gate
    is set: bit 0 for ``j -> i``, bit 1 for ``i -> j``)."""
    from .network import uniform_hash

    X = np.asarray(X)
    T = X.dtype.type
    Y = np.empty_like(X)
    sender = (lambda j: p) if np.ndim(p) == 0 else (lambda j: float(p[j]))
    for i in range(len(indptr) - 1):
        if awake is not None and not awake[i]:
            Y[i] = X[i]
            continue
        acc, den, unused, lost = [T(0)] * X.shape[1], T(0), T(0), False
        for q in range(indptr[i], indptr[i + 1]):
            j = int(indices[q])
            gate = 3 if bad is None else int(bad[q])
            gone = j != i and ((awake is not None and not awake[j])
                               or (gate & 1 and float(uniform_hash(seed, t, r, i, j)) < sender(j))
                               or (symmetric and gate & 2 and float(uniform_hash(seed, t, r, j, i)) < sender(i)))
            lost |= gone
            a = T(0) if gone else T(data[q])
            acc = [c + a * x for c, x in zip(acc, X[j])]
            den = den + a
            unused = unused + (T(data[q]) if gone else T(0))
        if lost and symmetric:
            acc = [c + unused * x for c, x in zip(acc, X[i])]
        elif lost and renormalise:
            acc = list(X[i]) if den == 0 else [c / den for c in acc]
        Y[i] = acc
    return Y


# ----------------------------------------------------------------- the baselines
# Each returns the list of the models x^(k) the algorithm's nodes use, k = 0..T (dense, one product per line).
def _dense(M):
    return np.asarray(M, dtype=np.float64)


def _of(M):
    """``t -> `` the dense matrix of iteration ``t``: ``M`` at every ``t`` for a matrix, ``M(t)`` for a callable
    (a time-varying network: the product of iteration ``t``'s rounds)."""
    if callable(M):
        return lambda t: _dense(M(t))
    D = _dense(M)
    return lambda t: D


def _grad(grad_fn, x):
    return np.asarray(grad_fn(x), dtype=np.float64)


# Below, a matrix argument may also be a callable ``t -> A_t`` (a time-varying network, see ``_of``).
@twin("frost")
def frost(A, x0, lr, grad_fn, T):
    """FROST (Xin, Xi & Khan 2019), non-ATC: ``x+ = A x - lr y``, ``y+ = A y + D_{k+1}^{-1} g(x+) - D_k^{-1} g(x)``,
    ``y0 = g(x0)``, ``D_k = Diag(A^k)`` (``Diag(A_{k-1} ... A_0)`` on a varying network); ``lr`` a scalar or one
    value per node."""
    A_of = _of(A)
    x = np.array(x0, dtype=np.float64)
    D = diag_powers(A_of, T)
    L = np.asarray(lr, dtype=np.float64)
    L = L[:, None] if L.ndim else L
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for k in range(T):
        Ak = A_of(k)
        x_new = Ak @ x - L * y
        g_new = _grad(grad_fn, x_new)
        y = Ak @ y + g_new / D[k + 1][:, None] - g / D[k][:, None]
        x, g = x_new, g_new
        xs.append(x.copy())
    return xs


@twin("pull-diag-gd")
def pull_diag_gd(A, x0, lr, grad_fn, T):
    """Pull-Diag-GD (Mai & Abed 2016): ``x+ = A x - lr D_k^{-1} g(x)``."""
    A_of = _of(A)
    x = np.array(x0, dtype=np.float64)
    D = diag_powers(A_of, T)
    xs = [x.copy()]
    for k in range(T):
        x = A_of(k) @ x - lr * _grad(grad_fn, x) / D[k][:, None]
        xs.append(x.copy())
    return xs


@twin("dsgd")
def dsgd(A, x0, lr, grad_fn, T):
    """DSGD, row-stochastic, no correction (ATC): ``x+ = A (x - lr g(x))``."""
    A_of = _of(A)
    x = np.array(x0, dtype=np.float64)
    xs = [x.copy()]
    for k in range(T):
        x = A_of(k) @ (x - lr * _grad(grad_fn, x))
        xs.append(x.copy())
    return xs


@twin("push-pull")
def push_pull(A, C, x0, lr, grad_fn, T):
    """Push-Pull (Pu, Shi, Xu & Nedic 2020): ``x+ = A (x - lr y)``, ``y+ = C y + g(x+) - g(x)``, ``y0 = g(x0)``."""
    A_of, C_of = _of(A), _of(C)
    x = np.array(x0, dtype=np.float64)
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for k in range(T):
        x = A_of(k) @ (x - lr * y)
        g_new = _grad(grad_fn, x)
        y = C_of(k) @ y + g_new - g
        g = g_new
        xs.append(x.copy())
    return xs


@twin("push-diging")
def push_diging(C, x0, lr, grad_fn, T, R=1):
    """(MG-)Push-DIGing (Nedic, Olshevsky & Shi 2017): ``u+ = C^R (u - lr y)``, ``v+ = C^R v``, ``x+ = u+ / v+``,
    ``y+ = C^R y + g(x+) - g(x)``; ``u0 = x0``, ``v0 = 1``, ``y0 = g(x0)``. (A callable ``C`` gives an
    iteration's product of rounds itself: ``R`` is then not used.)"""
    C_of = _of(C) if callable(C) else _of(np.linalg.matrix_power(_dense(C), R))
    x = np.array(x0, dtype=np.float64)
    u, v = x.copy(), np.ones((x.shape[0], 1))
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for k in range(T):
        Ck = C_of(k)
        u = Ck @ (u - lr * y)
        v = Ck @ v
        x = u / v
        g_new = _grad(grad_fn, x)
        y = Ck @ y + g_new - g
        g = g_new
        xs.append(x.copy())
    return xs


@twin("sgp")
def sgp(C, x0, lr, grad_fn, T):
    """SGP (Assran et al. 2019): ``h = x - lr g(z)``, ``x+ = C h``, ``w+ = C w``, ``z+ = x+ / w+``; ``x0 = z0``,
    ``w0 = 1``. Returns the models ``z``."""
    C_of = _of(C)
    z = np.array(x0, dtype=np.float64)
    x, w = z.copy(), np.ones((z.shape[0], 1))
    zs = [z.copy()]
    for k in range(T):
        Ck = C_of(k)
        x = Ck @ (x - lr * _grad(grad_fn, z))
        w = Ck @ w
        z = x / w
        zs.append(z.copy())
    return zs


@twin("centralized")
def centralized_sgd(x0, lr, grad_fn, T):
    """Parallel SGD with exact averaging: every node holds ``x``, ``x+ = x - lr mean_i g_i(x)``; ``x`` starts at
    the mean of the rows of ``x0``."""
    x0 = np.asarray(x0, dtype=np.float64)
    x = np.broadcast_to(x0.mean(axis=0), x0.shape).copy()
    xs = [x.copy()]
    for _ in range(T):
        x = x - lr * _grad(grad_fn, x).mean(axis=0)
        xs.append(x.copy())
    return xs


# ----------------------------------------------------------------- objectives
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(z):
    """SplitMix64's finaliser on Python integers."""
    z = (z + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def stream_key(seed, rep, node, iteration, batch):
    """Key of the random stream of one mini-batch: mix64 folded over (seed, rep, node, iteration, batch)."""
    k = _mix64(seed)
    for v in (rep, node, iteration, batch):
        k = _mix64(k ^ v)
    return k


def minibatch(key, M, B):
    """The B sample indices (in draw order) of the mini-batch with stream ``key``, out of M.

    A partial Fisher-Yates shuffle of ``range(M)``; step b swaps position b with
    b + u, u uniform in [0, M - b) by Lemire's multiply-shift with rejection.
    The draws come from the 64-bit outputs ``mix64(key + k * golden)``,
    k = 1, 2, ...: a bound up to 2^12 takes 16 bits and one below 2^32 takes 32
    bits from a pool (low bits first; a fresh output replaces the pool when it
    holds too few bits), larger bounds take a whole output.
    """
    counter, pool, pool_bits = 0, 0, 0

    def next64():
        nonlocal counter
        counter += 1
        return _mix64((key + _GOLDEN * counter) & _MASK64)

    def draw(bits):
        nonlocal pool, pool_bits
        if bits == 64:
            return next64()
        if pool_bits < bits:
            pool, pool_bits = next64(), 64
        out = pool & ((1 << bits) - 1)
        pool >>= bits
        pool_bits -= bits
        return out

    def below(bound):
        bits = 16 if bound <= 1 << 12 else 32 if bound < 1 << 32 else 64
        while True:
            m = draw(bits) * bound
            if (m & ((1 << bits) - 1)) >= ((1 << bits) - bound) % bound:
                return m >> bits

    perm = list(range(M))
    for b in range(B):
        k = b + below(M - b)
        perm[b], perm[k] = perm[k], perm[b]
    return perm[:B]


def logistic_gradient(H, Y, rho, x):
    """Gradient of (1/|S|) sum_l ln(1 + exp(-y_l h_l^T x)) + rho sum_j x_j^2 / (1 + x_j^2) over the rows given."""
    coef = -Y / (1.0 + np.exp(Y * (H @ x)))
    return (coef[:, None] * H).mean(0) + rho * 2 * x / (1 + x * x) ** 2


def logistic_stochastic_gradient(H, Y, n, rho, X, B, iteration, seed=0, batches=1, rep_offset=0):
    """Eq. (12b)'s stochastic gradients: node i of repetition r averages ``batches`` mini-batches of B of its M samples.

    ``X`` is (reps, n, d); node i owns rows [i M, (i + 1) M) of H and Y.
    """
    X = np.asarray(X, dtype=np.float64)
    M = H.shape[0] // n
    G = np.empty_like(X)
    for r in range(X.shape[0]):
        for i in range(n):
            Hi, Yi = H[i * M:(i + 1) * M], Y[i * M:(i + 1) * M]
            parts = []
            for t in range(batches):
                idx = minibatch(stream_key(seed, r + rep_offset, i, iteration, t), M, B)
                parts.append(logistic_gradient(Hi[idx], Yi[idx], 0.0, X[r, i]))
            G[r, i] = np.mean(parts, axis=0) + rho * 2 * X[r, i] / (1 + X[r, i] ** 2) ** 2
    return G


def least_squares_gradient(H, y, x):
    """Gradient and value of ``1/(2M) ||H x - y||^2`` over the M rows given: ``(H^T (H x - y) / M, ||H x - y||^2 /
    (2M))``."""
    r = H @ x - y
    return H.T @ r / H.shape[0], 0.5 * (r @ r) / H.shape[0]


def least_squares_stochastic_gradient(H, y, n, B, X, iteration, seed=0, batches=1, rep_offset=0, nodes=None,
                                      rep_period=0):
    """:class:`~rowstoch_fast.objectives.LeastSquares`' mini-batch gradients with NumPy's generators: replica r
    draws from ``default_rng([seed, rep_offset + (r % rep_period or r), iteration])``, each of its ``batches``
    calls ``random((n, M))`` picks node i's rows by ``argsort`` of row i (the first B), and the gradient of
    ``1/(2B) ||H_b x - y_b||^2`` is averaged over the calls. ``H`` (n, M, d), ``y`` (n, M), ``X`` (reps, m, d) for
    the nodes ``nodes`` (default all)."""
    M = H.shape[1]
    own = np.arange(n) if nodes is None else np.asarray(nodes)
    G = np.zeros(X.shape)
    for r in range(X.shape[0]):
        rng = np.random.default_rng([seed, rep_offset + (r % rep_period if rep_period else r), iteration])
        for _ in range(batches):
            idx = rng.random((n, M)).argsort(axis=1, kind="stable")[own, :B]
            for i, node in enumerate(own):
                h, t = H[node, idx[i]], y[node, idx[i]]
                G[r, i] += (h.T @ (h @ X[r, i] - t)) / B / batches
    return G


def least_squares_numpy_draws(f, X, iteration, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
    """:class:`~rowstoch_fast.objectives.LeastSquares` ``f``'s mini-batch gradients as the package computed them
    before its draws moved to C++: a NumPy generator per replica and step, ``argsort``, the products replica by
    replica with ``f._grad`` (the package's own products, since 2026-12 in C++: this checks the draws and the
    blocks of replicas, not the products). The C++ draws must give these bits (tests/test_objectives.py,
    bench/ls_minibatch.py, whose "former path" times these draws with today's products)."""
    own = np.arange(f.n) if nodes is None else np.asarray(nodes)
    Xr = X.reshape(-1, len(own), f.d)
    G = np.zeros_like(Xr)
    rows = own[:, None]
    for r in range(Xr.shape[0]):
        rng = np.random.default_rng([seed, rep_offset + (r % rep_period if rep_period else r), iteration])
        for _ in range(batches):
            idx = rng.random((f.n, f.M)).argsort(axis=1)[own, :f.batch]
            G[r] += f._grad(Xr[r], f.H[rows, idx], f.y[rows, idx]) / batches
    return G.reshape(X.shape)


def quadratic_stochastic_gradient(f, X, iteration, seed=0, batches=1, rep_offset=0, nodes=None, rep_period=0):
    """:class:`~rowstoch_fast.objectives.Quadratic` ``f``'s noisy gradients, replica by replica: ``q_i x_i - b_i``
    plus ``sigma`` times the mean of ``batches`` draws of ``N(0, I_d)`` per node from
    ``default_rng([seed, rep_offset + r, iteration])`` (``r`` the replica's stream: ``r % rep_period`` with a
    period), all ``n`` nodes drawn and the rows of ``nodes`` kept."""
    own = np.arange(f.n) if nodes is None else np.asarray(nodes)
    Xr = np.asarray(X).reshape(-1, len(own), f.d)
    G = np.empty_like(Xr)
    for r in range(Xr.shape[0]):
        stream = r % rep_period if rep_period else r
        noise = np.random.default_rng([seed, rep_offset + stream, iteration]).standard_normal((batches, f.n, f.d))
        G[r] = f.q[own] * Xr[r] - f.b[own]
        G[r] += f.sigma * noise.mean(0)[own]
    return G.reshape(np.shape(X))


# ---------------------------------------------------------------- undirected networks (doubly stochastic W)
@twin("dgd")
def dgd(W, x0, lr, grad_fn, T):
    """DGD: ``x+ = W x - lr g(x)``."""
    W_of = _of(W)
    x = np.array(x0, dtype=np.float64)
    xs = [x.copy()]
    for t in range(T):
        x = W_of(t) @ x - lr * _grad(grad_fn, x)
        xs.append(x.copy())
    return xs


@twin("choco-sgd")
def choco_sgd(W, x0, lr, grad_fn, T, gamma=1.0, compress=None, mix=None):
    """CHOCO-SGD: ``h = x - lr g(x)``, ``q = Q(h - x_hat)``, ``x_hat+ = x_hat + q``, ``x+ = h + gamma (W - I)
    x_hat+``, ``x_hat_0 = 0``; ``compress(V, t)`` is ``Q`` at iteration ``t`` (None: no compression), ``mix(V,
    t)`` what the neighbours' copies give at iteration ``t`` (None: ``W V``; a network's links: delays, noise)."""
    W_of = _of(W)
    mix = mix or (lambda V, t: W_of(t) @ V)
    x = np.array(x0, dtype=np.float64)
    x_hat = np.zeros_like(x)
    xs = [x.copy()]
    for t in range(T):
        h = x - lr * _grad(grad_fn, x)
        q = h - x_hat if compress is None else compress(h - x_hat, t)
        x_hat = x_hat + q
        x = h + gamma * (mix(x_hat, t) - x_hat)
        xs.append(x.copy())
    return xs


@twin("compressed-push-pull")
def compressed_push_pull(A, C, x0, lr, grad_fn, T, gamma=1.0, a=1.0, compress_A=None, compress_C=None, mix_A=None,
                         mix_C=None, copies=False):
    """CPP: for ``v`` in (x with A, y with C): ``q = Q(v - h)``, ``v_hat = h + q``, ``v_hat_w = h_w + M q``,
    ``h <- (1 - a) h + a v_hat``, ``h_w <- (1 - a) h_w + a v_hat_w``; ``x+ = x - gamma (x_hat - x_hat_w) - lr y``,
    ``y+ = y - gamma (y_hat - y_hat_w) + g(x+) - g(x)``; ``h = h_w = 0``, ``y_0 = g(x_0)``; ``compress_M(V, t)``:
    ``Q`` (None: none); ``mix_M(V, t)``: what the messages ``V`` give their receivers at iteration ``t`` (None:
    ``M V``; a network's links: losses, sleep, delays, noise); ``copies``: ``v_hat_w = mix_M(v_hat, t)``, the
    receivers' copies of ``v_hat`` mixed, instead of ``h_w + mix_M(q, t)``."""
    A, C = _dense(A), _dense(C)
    mixes = {"x": mix_A or (lambda V, t: A @ V), "y": mix_C or (lambda V, t: C @ V)}
    x = np.array(x0, dtype=np.float64)
    g = _grad(grad_fn, x)
    y = g.copy()
    h = {"x": np.zeros_like(x), "y": np.zeros_like(x)}
    hw = {"x": np.zeros_like(x), "y": np.zeros_like(x)}
    xs = [x.copy()]

    def exchange(key, M, v, compress, t):
        q = v - h[key] if compress is None else compress(v - h[key], t)
        hat = h[key] + q
        hat_w = mixes[key](hat, t) if copies else hw[key] + mixes[key](q, t)
        h[key], hw[key] = (1 - a) * h[key] + a * hat, (1 - a) * hw[key] + a * hat_w
        return hat - hat_w

    for t in range(T):
        x_new = x - gamma * exchange("x", A, x, compress_A, t) - lr * y
        g_new = _grad(grad_fn, x_new)
        y = y - gamma * exchange("y", C, y, compress_C, t) + g_new - g
        x, g = x_new, g_new
        xs.append(x.copy())
    return xs


@twin("diging")
def diging(W, x0, lr, grad_fn, T):
    """DIGing: ``x+ = W x - lr y``, ``y+ = W y + g(x+) - g(x)``, ``y0 = g(x0)``."""
    W_of = _of(W)
    x = np.array(x0, dtype=np.float64)
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for t in range(T):
        x = W_of(t) @ x - lr * y
        g_new = _grad(grad_fn, x)
        y = W_of(t) @ y + g_new - g
        g = g_new
        xs.append(x.copy())
    return xs


@twin("aug-dgm")
def aug_dgm(W, x0, lr, grad_fn, T):
    """AugDGM (ATC-DIGing): ``x+ = W (x - lr y)``, ``y+ = W (y + g(x+) - g(x))``, ``y0 = g(x0)``."""
    W_of = _of(W)
    x = np.array(x0, dtype=np.float64)
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for t in range(T):
        x = W_of(t) @ (x - lr * y)
        g_new = _grad(grad_fn, x)
        y = W_of(t) @ (y + g_new - g)
        g = g_new
        xs.append(x.copy())
    return xs


@twin("simple-gt")
def simple_gt(W, x0, lr, grad_fn, T):
    """SimpleGT (decent-bench 0.3.0's ``SimpleGT``, no paper cited): ``y+ = x - lr g(x)``, ``x+ = W x + y+ - y``,
    ``y0 = x0``."""
    W_of = _of(W)
    x = np.array(x0, dtype=np.float64)
    y = x.copy()
    xs = [x.copy()]
    for t in range(T):
        y_new = x - lr * _grad(grad_fn, x)
        x = W_of(t) @ x + y_new - y
        y = y_new
        xs.append(x.copy())
    return xs


@twin("extra")
def extra(W, x0, lr, grad_fn, T):
    """EXTRA (Shi, Ling, Wu & Yin 2015), as written in the paper: ``x1 = W x0 - lr g(x0)``,
    ``x_{k+2} = (I + W) x_{k+1} - W_tilde x_k - lr (g(x_{k+1}) - g(x_k))``, ``W_tilde = (I + W) / 2``; a
    time-varying ``W``: ``(I + W_{k+1}) x_{k+1} - (I + W_k) x_k / 2`` (each iterate mixed once, in its iteration)."""
    W_of = _of(W)
    eye = np.eye(len(W_of(0)))
    x_prev = np.array(x0, dtype=np.float64)
    g_prev = _grad(grad_fn, x_prev)
    x = W_of(0) @ x_prev - lr * g_prev
    xs = [x_prev.copy(), x.copy()]
    for t in range(1, T):
        g = _grad(grad_fn, x)
        x, x_prev, g_prev = ((eye + W_of(t)) @ x - (eye + W_of(t - 1)) @ x_prev / 2 - lr * (g - g_prev), x,
                             g)
        xs.append(x.copy())
    return xs[:T + 1]


@twin("nids")
def nids(W, x0, lr, grad_fn, T, first="plain"):
    """NIDS (Li, Shi & Yan 2019): ``x1 = x0 - lr g(x0)`` (``first="mixed"``: ``W_tilde (x0 - lr g(x0))``, Exact
    Diffusion's), ``x_{k+2} = W_tilde (2 x_{k+1} - x_k - lr (g(x_{k+1}) - g(x_k)))``, ``W_tilde = (I + W) / 2``."""
    W_of = _of(W)
    W_tilde = lambda t: (np.eye(len(W_of(t))) + W_of(t)) / 2  # noqa: E731
    x_prev = np.array(x0, dtype=np.float64)
    g_prev = _grad(grad_fn, x_prev)
    x = x_prev - lr * g_prev
    if first == "mixed":
        x = W_tilde(0) @ x
    xs = [x_prev.copy(), x.copy()]
    for t in range(1, T):
        g = _grad(grad_fn, x)
        x, x_prev, g_prev = W_tilde(t) @ (2 * x - x_prev - lr * (g - g_prev)), x, g
        xs.append(x.copy())
    return xs[:T + 1]


@twin("exact-diffusion")
def exact_diffusion(W, x0, lr, grad_fn, T):
    """Exact Diffusion (Yuan, Ying, Zhao & Sayed 2019): ``psi+ = x - lr g(x)``, ``phi+ = psi+ + x - psi``,
    ``x+ = W_bar phi+``, ``W_bar = (I + W) / 2``, ``psi_0 = x_0``."""
    W_of = _of(W)
    x = np.array(x0, dtype=np.float64)
    psi = x.copy()
    xs = [x.copy()]
    for t in range(T):
        psi_new = x - lr * _grad(grad_fn, x)
        x, psi = (np.eye(len(x)) + W_of(t)) / 2 @ (psi_new + x - psi), psi_new
        xs.append(x.copy())
    return xs


@twin("local-dsgd")
def local_dsgd(A, x0, lr, grad_fn, T, local_steps=4):
    """Local DSGD (Koloskova et al. 2020): ``v = x - lr g(x)``, then ``x+ = A v`` every ``local_steps``-th step
    (iterations ``t`` with ``(t + 1) % K == 0``), ``x+ = v`` otherwise."""
    A_of = _of(A)
    x = np.array(x0, dtype=np.float64)
    xs = [x.copy()]
    for t in range(T):
        v = x - lr * _grad(grad_fn, x)
        x = A_of(t) @ v if (t + 1) % local_steps == 0 else v
        xs.append(x.copy())
    return xs


@twin("dlm")
def dlm(W, x0, lr, grad_fn, T, penalty=1.0):
    """DLM (Ling, Shi, Wu & Ribeiro 2015) with the weighted Laplacian ``L = I - W``: iteration 0 only
    communicates; then ``x+ = x - lr (g(x) + c L x + alpha)``, ``alpha+ = alpha + c L x+``, ``alpha_0 = 0``."""
    W = _dense(W)
    L = np.eye(len(W)) - W
    x = np.array(x0, dtype=np.float64)
    alpha = np.zeros_like(x)
    xs = [x.copy(), x.copy()]  # (iteration 0: no change of x)
    for _ in range(1, T):
        x = x - lr * (_grad(grad_fn, x) + penalty * L @ x + alpha)
        alpha = alpha + penalty * L @ x
        xs.append(x.copy())
    return xs[:T + 1]


@twin("k-gt")
def k_gt(W, x0, lr, grad_fn, T, local_steps=4, server_lr=1.0):
    """K-GT (Liu, Lin, Koloskova & Stich 2024, Algorithm 1): per round, ``K`` local steps
    ``x <- x - lr (g(x) + c)`` from ``x_r``, ``z = (x_r - x) / (K lr)``, ``c <- c - z + W z``,
    ``x_{r+1} = W (x_r - K lr_s lr z)``, ``c_0 = 0``; the models after every local step (``T`` of them)."""
    W = _dense(W)
    x = np.array(x0, dtype=np.float64)
    c = np.zeros_like(x)
    xs = [x.copy()]
    while len(xs) <= T:
        x_round = x.copy()
        for _ in range(local_steps):
            x = x - lr * (_grad(grad_fn, x) + c)
            xs.append(x.copy())
        z = (x_round - x) / (local_steps * lr)
        c = c - z + W @ z
        x = W @ (x_round - local_steps * server_lr * lr * z)
        xs[-1] = x.copy()
    return xs[:T + 1]


@twin("led")
def led(W, x0, lr, grad_fn, T, local_steps=4, dual_step=None):
    """LED (Alghunaim 2024, Algorithm 1): per round ``phi = x``, ``tau`` steps ``phi <- phi - lr g(phi) - beta y``,
    ``x <- W phi``, ``y <- y + phi - x`` (``beta`` default ``1 / (2 tau)``, ``y_0 = 0``); the iterate after every
    local step (``phi`` inside a round, ``x`` at its end)."""
    beta = 0.5 / local_steps if dual_step is None else dual_step
    W = _dense(W)
    x = np.array(x0, dtype=np.float64)
    y = np.zeros_like(x)
    xs = [x.copy()]
    while len(xs) <= T:
        phi = x.copy()
        for _ in range(local_steps):
            phi = phi - lr * _grad(grad_fn, phi) - beta * y
            xs.append(phi.copy())
        x = W @ phi
        y = y + phi - x
        xs[-1] = x.copy()
    return xs[:T + 1]


@twin("prox-skip")
def prox_skip(W, x0, lr, grad_fn, T, comm_probability=0.25, dual_step=None, chi=1.0, seed=0):
    """Decentralized ProxSkip (Mishchenko et al. 2022), as decent-bench 0.3.0 writes it: ``z = x - lr g(x) - y``;
    with probability ``p`` (the coins of ``ProxSkip.coins``) ``x+ = W_a z``, ``y+ = y + beta (z - x+)``, else
    ``x+ = z``; ``W_a = I - (I - W) / (2 chi)``, ``beta`` default ``p``."""
    from .algorithms.prox_skip import ProxSkip

    beta = comm_probability if dual_step is None else dual_step
    W = _dense(W)
    W_a = np.eye(len(W)) - (np.eye(len(W)) - W) / (2 * chi)
    coins = ProxSkip.coins(seed, comm_probability, T)
    x = np.array(x0, dtype=np.float64)
    y = np.zeros_like(x)
    xs = [x.copy()]
    for t in range(T):
        z = x - lr * _grad(grad_fn, x) - y
        if coins[t]:
            x = W_a @ z
            y = y + beta * (z - x)
        else:
            x = z
        xs.append(x.copy())
    return xs


@twin("wang-elia")
def wang_elia(W, x0, lr, grad_fn, T):
    """Wang & Elia (2010, 2011): ``x+ = x - K (x + z) - lr g(x)``, ``z+ = z + K x``, ``K = (I - W) / 2``,
    ``z_0 = 0``."""
    W = _dense(W)
    K = (np.eye(len(W)) - W) / 2
    x = np.array(x0, dtype=np.float64)
    z = np.zeros_like(x)
    xs = [x.copy()]
    for _ in range(T):
        x, z = x - K @ (x + z) - lr * _grad(grad_fn, x), z + K @ x
        xs.append(x.copy())
    return xs


@twin("admm")
def admm(W, x0, lr, grad_fn, T, prox=None):
    """Decentralized ADMM (Shi, Ling, Yuan, Wu & Yin 2014) with link weights ``w_ij``, ``c = 1 / (2 lr)``,
    ``d_i = 1 - w_ii``, as the reference writes it: ``x+ = argmin f_i(x) + c d_i ||x||^2 - x^T (c (d_i x_i +
    sum_{j != i} w_ij x_j) - alpha_i)`` (through ``prox(V, t)``, the local proximal operator with one step per
    row), ``alpha+ = alpha + c (x+ - W x+)``, ``alpha_0 = 0``; iteration 0 only communicates."""
    W = _dense(W)
    c, d = 1.0 / (2.0 * lr), 1.0 - np.diag(W)
    off = W - np.diag(np.diag(W))
    x = np.array(x0, dtype=np.float64)
    alpha = np.zeros_like(x)
    xs = [x.copy(), x.copy()]
    for _ in range(1, T):
        u = c * (d[:, None] * x + off @ x) - alpha  # minimise f_i(x) + c d_i ||x||^2 - x^T u
        t = 1.0 / (2.0 * c * d)  # = argmin f_i(x) + ||x - t u||^2 / (2 t)
        x = prox(t[:, None] * u, t)
        alpha = alpha + c * (x - W @ x)
        xs.append(x.copy())
    return xs[:T + 1]


@twin("dinno")
def dinno(W, x0, lr, grad_fn, T, local_steps=4, penalty=0.5):
    """DiNNO (Yu, Vincent & Schwager 2022, Algorithm 1) with link weights ``w_ij``: per round ``p += rho sum_j w_ij
    (x_i - x_j)``, then ``B`` steps ``psi -= lr (g(psi) + p + 2 rho sum_j w_ij (psi_i - (x_i + x_j) / 2))`` from
    ``psi = x``; ``x = psi``; ``p_0 = 0``; the iterate after every local step."""
    W = _dense(W)
    off = W - np.diag(np.diag(W))
    d = off.sum(1)[:, None]
    x = np.array(x0, dtype=np.float64)
    p = np.zeros_like(x)
    xs = [x.copy()]
    while len(xs) <= T:
        p = p + penalty * (d * x - off @ x)
        psi = x.copy()
        for _ in range(local_steps):
            psi = psi - lr * (_grad(grad_fn, psi) + p + 2 * penalty * (d * psi - (d * x + off @ x) / 2))
            xs.append(psi.copy())
        x = psi
    return xs[:T + 1]


def _links_of(W):
    """The links ``(i, j)``, ``i != j``, of a dense ``W`` (its stored off-diagonal weights)."""
    n = len(W)
    return [(i, j) for i in range(n) for j in range(n) if i != j and W[i, j] != 0]


def _edge_update(z, v, rho, a):
    """The per-link relaxed-ADMM update, one message per directed link: node ``i`` receives from ``j`` the message
    ``z_ji - 2 rho_ji v_j`` and sets ``z_ij <- (1 - a) z_ij - a (z_ji - 2 rho_ij v_j)`` (all messages from the old
    ``z``)."""
    return {(i, j): (1 - a) * z[i, j] - a * (z[j, i] - 2 * rho[j, i] * v[..., j, :]) for (i, j) in z}


def _edge_sum(z, like):
    """``sum_j z_ij`` of every node ``i``, shaped as ``like``."""
    out = np.zeros_like(like)
    for (i, _), v in z.items():
        out[..., i, :] += v
    return out


@twin("lt-admm")
def lt_admm(W, x0, lr, grad_fn, T, local_steps=4, penalty=1.0, relaxation=0.5, dual_step=None):
    """LT-ADMM (Ren, Bastianello, Johansson & Parisini 2025, Algorithm 1 with full gradients, as decent-bench 0.3.0
    reads it), one variable ``z_ij`` per directed link, link penalties ``rho_ij = rho w_ij``, ``z_ij,0 = rho_ij
    x0_i``: per round ``c_i = sum_j (rho_ij x_i - z_ij)``, ``tau`` steps ``phi <- phi - lr g(phi) - beta c`` from
    ``phi = x``, ``x <- phi``, then every link's ``z_ij`` by :func:`_edge_update` with ``v = x`` (``beta`` default
    ``lr``); the iterate after every local step."""
    return _lt_admm_rounds(W, x0, lr, lambda phi, k: _grad(grad_fn, phi), T, local_steps, penalty, relaxation,
                           dual_step)


def _lt_admm_rounds(W, x0, lr, estimate, T, local_steps, penalty, relaxation, dual_step, refresh=None):
    """LT-ADMM's rounds with the local step's gradient ``estimate(phi, k)`` (``k``: the iteration), then
    ``refresh(phi_new, k)`` after each step when given."""
    W = _dense(W)
    beta, rho = (lr if dual_step is None else dual_step), penalty * W
    x = np.array(x0, dtype=np.float64)
    z = {(i, j): rho[i, j] * x[..., i, :] for (i, j) in _links_of(W)}
    xs = [x.copy()]
    while len(xs) <= T:
        c = np.zeros_like(x)
        for (i, j), zij in z.items():
            c[..., i, :] += rho[i, j] * x[..., i, :] - zij
        phi = x.copy()
        for _ in range(local_steps):
            k = len(xs) - 1
            phi = phi - lr * estimate(phi, k) - beta * c
            if refresh is not None:
                refresh(phi, k)
            xs.append(phi.copy())
        x = phi
        z = _edge_update(z, x, rho, relaxation)
    return xs[:T + 1]


@twin("lt-admm-vr")
def lt_admm_vr(W, x0, lr, grad_fn, T, local_steps=4, penalty=1.0, relaxation=0.5, dual_step=None, sample_grad=None,
               samples=1, draw=None):
    """LT-ADMM-VR (Ren, Bastianello, Johansson & Parisini 2025, as decent-bench 0.3.0 writes it with ``v2=True``,
    batch 1): :func:`lt_admm` whose local step at iteration ``k`` draws ``s = draw(k)`` and steps with
    ``grad f_is(phi) - table[s] + mean(table)``, then sets ``table[s] = grad f_is(phi_new)``; the table starts at
    every sample's gradient at ``x0``. Sample arguments as :func:`gt_saga`'s."""
    x = np.array(x0, dtype=np.float64)
    sample_grad, samples, draw = _per_sample(x, grad_fn, sample_grad, samples, draw)
    table = _sample_table(x, sample_grad, samples)

    def estimate(phi, k):
        idx = draw(k)
        old = np.choose(idx[..., None], table)
        return np.asarray(sample_grad(phi.copy(), idx), dtype=np.float64) - old + np.mean(table, axis=0)

    def refresh(phi, k):
        idx = draw(k)
        fresh = np.asarray(sample_grad(phi.copy(), idx), dtype=np.float64)
        for s in range(samples):
            table[s] = np.where((idx == s)[..., None], fresh, table[s])

    return _lt_admm_rounds(W, x0, lr, estimate, T, local_steps, penalty, relaxation, dual_step, refresh)


@twin("atg")
def atg(W, x0, lr, grad_fn, T, penalty=1.0, relaxation=0.5, gamma=0.1):
    """ATG (Carnevale, Bastianello, Notarstefano & Carli 2025), as decent-bench 0.3.0 writes it, one pair
    ``(z^y_ij, z^s_ij)`` per directed link (``0`` at the start), link penalties ``rho_ij = rho w_ij``:
    ``y = (x + sum_j z^y_ij) / (1 + sum_j rho_ij)``, ``s = (g(x) + sum_j z^s_ij) / (1 + sum_j rho_ij)``,
    ``x <- (1 - gamma) x + gamma (y - delta s)`` with ``delta = lr / gamma`` (``lr``: the step along ``s``), then
    every link's ``z^y``, ``z^s`` by :func:`_edge_update` with ``v = y``, ``s``."""
    W = _dense(W)
    rho = penalty * W
    x = np.array(x0, dtype=np.float64)
    zy = {(i, j): np.zeros_like(x[..., i, :]) for (i, j) in _links_of(W)}
    zs = {k: v.copy() for k, v in zy.items()}
    scale = (1.0 + (rho.sum(1) - np.diag(rho)))[:, None]
    xs = [x.copy()]
    for _ in range(T):
        y = (x + _edge_sum(zy, x)) / scale
        s = (_grad(grad_fn, x) + _edge_sum(zs, x)) / scale
        x = (1 - gamma) * x + gamma * (y - (lr / gamma) * s)
        zy, zs = _edge_update(zy, y, rho, relaxation), _edge_update(zs, s, rho, relaxation)
        xs.append(x.copy())
    return xs


# ---------------------------------------------------------------- proximal methods (composite problems)
def _prox_of(prox, lr):
    """``v -> prox(v, lr)``, or the identity without a ``prox`` (``r = 0``)."""
    return (lambda v: v) if prox is None else (lambda v: prox(v, lr))


@twin("pg-extra")
def pg_extra(W, x0, lr, grad_fn, T, prox=None):
    """PG-EXTRA (Shi, Ling, Wu & Yin 2015, eqs. (3a)-(3b)): ``x^{1/2} = W x0 - lr g(x0)``,
    ``x^{k+1+1/2} = W x^{k+1} + x^{k+1/2} - W_tilde x^k - lr (g(x^{k+1}) - g(x^k))``, ``x^{k+1} = prox(x^{k+1/2})``
    (``prox(v, lr)``: the regularizer's ``prox_{lr r}``), ``W_tilde = (I + W) / 2``."""
    P = _prox_of(prox, lr)
    W = _dense(W)
    W_tilde = (np.eye(len(W)) + W) / 2
    x_prev = np.array(x0, dtype=np.float64)
    g_prev = _grad(grad_fn, x_prev)
    half = W @ x_prev - lr * g_prev
    x = P(half)
    xs = [x_prev.copy(), x.copy()]
    for _ in range(1, T):
        g = _grad(grad_fn, x)
        half = W @ x + half - W_tilde @ x_prev - lr * (g - g_prev)
        x, x_prev, g_prev = P(half), x, g
        xs.append(x.copy())
    return xs[:T + 1]


@twin("prox-nids")
def prox_nids(W, x0, lr, grad_fn, T, prox=None):
    """NIDS with its proximal step (Li, Shi & Yan 2019, Algorithm 1, ``c = 1/2``): ``z1 = x0 - lr g(x0)``,
    ``z^{k+1} = z^k - x^k + W_tilde (2 x^k - x^{k-1} - lr g(x^k) + lr g(x^{k-1}))``, ``x^k = prox(z^k)``."""
    P = _prox_of(prox, lr)
    W = _dense(W)
    W_tilde = (np.eye(len(W)) + W) / 2
    x_prev = np.array(x0, dtype=np.float64)
    g_prev = _grad(grad_fn, x_prev)
    z = x_prev - lr * g_prev
    x = P(z)
    xs = [x_prev.copy(), x.copy()]
    for _ in range(1, T):
        g = _grad(grad_fn, x)
        z = z - x + W_tilde @ (2 * x - x_prev - lr * g + lr * g_prev)
        x, x_prev, g_prev = P(z), x, g
        xs.append(x.copy())
    return xs[:T + 1]


@twin("prox-exact-diffusion")
def prox_exact_diffusion(W, x0, lr, grad_fn, T, prox=None):
    """Proximal Exact Diffusion as PUDA (Alghunaim, Ryu, Yuan & Sayed 2021) with ``A = W_bar``, ``B^2 = I - W_bar``,
    ``C = 0``, written with the matrix square root itself: ``z^k = x^{k-1} - lr g(x^{k-1}) - B y^{k-1}``,
    ``y^k = y^{k-1} + B z^k``, ``x^k = prox(W_bar z^k)``, ``y^0 = 0``."""
    P = _prox_of(prox, lr)
    W = _dense(W)
    W_bar = (np.eye(len(W)) + W) / 2
    lam, V = np.linalg.eigh(np.eye(len(W)) - W_bar)  # (symmetric, positive semidefinite: its square root)
    B = (V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T
    x = np.array(x0, dtype=np.float64)
    y = np.zeros_like(x)
    xs = [x.copy()]
    for _ in range(T):
        z = x - lr * _grad(grad_fn, x) - B @ y
        y = y + B @ z
        x = P(W_bar @ z)
        xs.append(x.copy())
    return xs



@twin("sonata")
def sonata(C, x0, lr, grad_fn, T, alpha=1.0, prox=None):
    """SONATA over digraphs (Scutari & Sun 2019, steps S.2-S.3) with the linearised surrogate, ``tau = 1 / lr``:
    ``x_tilde = prox(x - lr y)``, ``phi+ = C phi``, ``x+ = (C (phi * (x + alpha (x_tilde - x)))) / phi+``,
    ``y+ = (C (phi * y + g(x+) - g(x))) / phi+``; ``phi0 = 1``, ``y0 = g(x0)``. The de-biased trackers ``y`` are
    kept (not the numerators ``phi * y`` the method keeps)."""
    P = _prox_of(prox, lr)
    C_of = _of(C)
    x = np.array(x0, dtype=np.float64)
    phi = np.ones((x.shape[0], 1))
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for k in range(T):
        Ck = C_of(k)
        x_tilde = P(x - lr * y)
        phi_new = Ck @ phi
        x_new = Ck @ (phi * (x + alpha * (x_tilde - x))) / phi_new
        g_new = _grad(grad_fn, x_new)
        y = Ck @ (phi * y + g_new - g) / phi_new
        x, g, phi = x_new, g_new, phi_new
        xs.append(x.copy())
    return xs

# ---------------------------------------------------------------- more directed methods
@twin("add-opt")
def add_opt(C, x0, lr, grad_fn, T):
    """ADD-OPT (Xi, Xin & Khan 2018): ``x+ = C x - lr w``, ``v+ = C v``, ``z+ = x+ / v+``,
    ``w+ = C w + g(z+) - g(z)``; ``x0 = z0``, ``v0 = 1``, ``w0 = g(z0)``. Returns the models ``z``."""
    C_of = _of(C)
    z = np.array(x0, dtype=np.float64)
    x, v = z.copy(), np.ones((z.shape[0], 1))
    g = _grad(grad_fn, z)
    w = g.copy()
    zs = [z.copy()]
    for k in range(T):
        Ck = C_of(k)
        x = Ck @ x - lr * w
        v = Ck @ v
        z = x / v
        g_new = _grad(grad_fn, z)
        w = Ck @ w + g_new - g
        g = g_new
        zs.append(z.copy())
    return zs


@twin("abm")
def abm(A, C, x0, lr, grad_fn, T, momentum=0.2):
    """ABm (Xin & Khan 2019): ``x+ = A x - lr y + momentum (x - x_prev)``, ``y+ = C y + g(x+) - g(x)``;
    ``x_prev = x0``, ``y0 = g(x0)``."""
    A_of, C_of = _of(A), _of(C)
    x = np.array(x0, dtype=np.float64)
    x_prev = x.copy()
    g = _grad(grad_fn, x)
    y = g.copy()
    xs = [x.copy()]
    for k in range(T):
        x, x_prev = A_of(k) @ x - lr * y + momentum * (x - x_prev), x
        g_new = _grad(grad_fn, x)
        y = C_of(k) @ y + g_new - g
        g = g_new
        xs.append(x.copy())
    return xs


@twin("robust-gradient-push")
def robust_gradient_push(C, x0, lr, grad_fn, T, lost=None, message=None, age=None, noise=None, awake=None):
    """Robust gradient-push (Spiridonoff, Olshevsky & Paschalidis 2020), dense, link by link:
    ``h = x - lr g(z)``; every link ``j -> i`` (``i != j``) adds ``C[i, j] (h_j, w_j)`` to its undelivered mass
    ``p_ij``; ``(x, w)_i = C[i, i] (h_i, w_i) + sum_{j: arrived} p_ij`` and those ``p_ij = 0``; ``z = x / w``;
    ``x0 = z0``, ``w0 = 1``. ``lost(k, i, j)`` says whether iteration ``k``'s message ``j -> i`` is lost (None:
    none are). Returns the models ``z``.

    With ``message``, ``age`` or ``noise`` (a network's message layers) it runs the running sums themselves:
    node ``j`` sends on ``j -> i`` its running sum ``s_ij(k) = sum_{u <= k} C[i, j] (Q_u(h_j), Q_u(w_j))``
    (``message(k, V, q)``: what the rows ``V`` send at iteration ``k`` as the step's ``q``-th quantity, 0 the
    numerators and 1 the weights; None: ``V``); a receiver whose message
    arrives takes ``r_new - r_old``, ``r_new = s_ij(k - age(k, i, j)) + noise(k, i, j)`` the running sum it
    received (``noise(k, i, j)``: the pair of vectors added to it) and ``r_old`` the one before. With
    ``awake(k)`` (sleeping nodes: ``lost`` must also say their links are silent) a sleeping node adds nothing to
    its running sums and keeps its whole ``(h_j, w_j)``."""
    if message is not None or age is not None or noise is not None or awake is not None:
        return _robust_push_running_sums(_dense(C), x0, lr, grad_fn, T, lost, message, age, noise, awake)
    Cd = _dense(C)
    n = Cd.shape[0]
    z = np.array(x0, dtype=np.float64)
    x, w = z.copy(), np.ones((n, 1))
    pending = {}
    zs = [z.copy()]
    for k in range(T):
        h = x - lr * _grad(grad_fn, z)
        x_new, w_new = np.zeros_like(x), np.zeros_like(w)
        for i in range(n):
            x_new[i] += Cd[i, i] * h[i]
            w_new[i] += Cd[i, i] * w[i]
            for j in range(n):
                if j == i or Cd[i, j] == 0:
                    continue
                px, pw = pending.get((i, j), (0.0, 0.0))
                px, pw = px + Cd[i, j] * h[j], pw + Cd[i, j] * w[j]
                if lost is not None and lost(k, i, j):
                    pending[(i, j)] = (px, pw)
                else:
                    x_new[i] += px
                    w_new[i] += pw
                    pending[(i, j)] = (0.0, 0.0)
        x, w = x_new, w_new
        z = x / w
        zs.append(z.copy())
    return zs


def _robust_push_running_sums(Cd, x0, lr, grad_fn, T, lost, message, age, noise, awake):
    """:func:`robust_gradient_push` through the running sums a network's messages carry (see there)."""
    n = Cd.shape[0]
    message = message or (lambda k, V, q: V)
    z = np.array(x0, dtype=np.float64)
    x, w = z.copy(), np.ones((n, 1))
    sent, received = {}, {}  # (i, j) -> [running sums after iterations 0, 1, ...]; the last one received
    zs = [z.copy()]
    for k in range(T):
        h = x - lr * _grad(grad_fn, z)
        mh, mw = message(k, h, 0), message(k, w, 1)  # (two quantities: each its own draws)
        up = np.ones(n, dtype=bool) if awake is None else np.asarray(awake(k), dtype=bool)
        own = np.where(up, Cd.diagonal(), 1.0)[:, None]  # (a sleeping node keeps its whole share)
        x_new, w_new = own * h, own * w
        for i in range(n):
            for j in range(n):
                if j == i or Cd[i, j] == 0:
                    continue
                sums = sent.setdefault((i, j), [])
                last = sums[-1] if sums else (0.0, 0.0)
                c = Cd[i, j] if up[j] else 0.0
                sums.append((last[0] + c * mh[j], last[1] + c * mw[j]))
                if lost is not None and lost(k, i, j):
                    continue
                sx, sw = sums[k - (0 if age is None else age(k, i, j))]
                ex, ew = (0.0, 0.0) if noise is None else noise(k, i, j)
                old = received.get((i, j), (0.0, 0.0))
                received[(i, j)] = (sx + ex, sw + ew)
                x_new[i] += received[(i, j)][0] - old[0]
                w_new[i] += received[(i, j)][1] - old[1]
        x, w = x_new, w_new
        z = x / w
        zs.append(z.copy())
    return zs


@twin("r-fast")
def r_fast(A, C, x0, lr, grad_fn, T, lost_A=None, lost_C=None):
    """R-FAST (Zhu, Tian, Huang, Xu & He 2023), synchronous, dense, link by link: ``v = x - lr y``; a receiver
    keeps the last ``v_j`` that arrived on each link (``b_ij``, starting at ``x0_j``) and pulls
    ``x_i = sum_j A[i, j] b_ij``; the trackers go as running sums (every link ``j -> i``, ``i != j``, adds
    ``C[i, j] y_j`` to its undelivered mass ``p_ij``; ``y_i = C[i, i] y_i + sum_{j: arrived} p_ij +
    g_i(x_new) - g_i(x)``, and those ``p_ij = 0``); ``y0 = g(x0)``. ``lost_A(k, i, j)`` / ``lost_C(k, i, j)``
    say whether iteration ``k``'s message ``j -> i`` of ``A`` / ``C`` is lost (None: none are)."""
    Ad, Cd = _dense(A), _dense(C)
    n = Ad.shape[0]
    x = np.array(x0, dtype=np.float64)
    g = _grad(grad_fn, x)
    y = g.copy()
    buffers = {(i, j): x[j].copy() for i in range(n) for j in range(n) if Ad[i, j] != 0}
    pending = {}
    xs = [x.copy()]
    for k in range(T):
        v = x - lr * y
        x_new, y_new = np.zeros_like(x), np.zeros_like(y)
        for i in range(n):
            for j in range(n):
                if Ad[i, j] != 0:
                    if i == j or lost_A is None or not lost_A(k, i, j):
                        buffers[(i, j)] = v[j].copy()
                    x_new[i] += Ad[i, j] * buffers[(i, j)]
                if Cd[i, j] == 0:
                    continue
                if i == j:
                    y_new[i] += Cd[i, i] * y[i]
                    continue
                p = pending.get((i, j), 0.0) + Cd[i, j] * y[j]
                if lost_C is not None and lost_C(k, i, j):
                    pending[(i, j)] = p
                else:
                    y_new[i] += p
                    pending[(i, j)] = 0.0
        g_new = _grad(grad_fn, x_new)
        x, y, g = x_new, y_new + g_new - g, g_new
        xs.append(x.copy())
    return xs


def _per_sample(x, grad_fn, sample_grad, samples, draw):
    """The per-sample oracle of the variance-reduced twins: ``sample_grad(X, idx)`` (default: ``grad_fn(X)``, one
    sample per node), the number of samples and ``draw(k)``, iteration ``k``'s sample ids (default: all 0)."""
    if sample_grad is None:
        sample_grad, samples = (lambda X, idx: grad_fn(X)), 1
    if draw is None:
        draw = lambda k: np.zeros(x.shape[:-1], dtype=np.int64)  # noqa: E731
    return sample_grad, samples, draw


def _sample_table(x, sample_grad, samples):
    """Every sample's gradient at ``x``: the SAGA table, one block per sample id."""
    return [np.array(sample_grad(x.copy(), np.full(x.shape[:-1], s)), dtype=np.float64) for s in range(samples)]


@twin("gt-saga")
def gt_saga(W, x0, lr, grad_fn, T, sample_grad=None, samples=1, draw=None):
    """GT-SAGA (Xin, Khan & Kar 2020): ``x+ = W x - lr y``; node ``i`` draws sample ``s = draw(k)[..., i]``,
    ``g+ = grad f_is(x+) - table[s] + mean(table)``, then ``table[s] = grad f_is(x+)``;
    ``y+ = W y + g+ - g``; the table starts at every sample's gradient at ``x0``, ``g0 = y0 = mean(table)``.
    ``sample_grad(X, idx)``: the gradients of samples ``idx`` (default: ``grad_fn(X)``, one sample per node);
    ``draw(k)``: iteration ``k``'s sample ids, shape ``X.shape[:-1]`` (default: all 0)."""
    Wd = _dense(W)
    x = np.array(x0, dtype=np.float64)
    sample_grad, samples, draw = _per_sample(x, grad_fn, sample_grad, samples, draw)
    table = _sample_table(x, sample_grad, samples)
    g = np.mean(table, axis=0)
    y = g.copy()
    xs = [x.copy()]
    for k in range(T):
        x = Wd @ x - lr * y
        idx = draw(k)
        fresh = np.asarray(sample_grad(x.copy(), idx), dtype=np.float64)
        old = np.choose(idx[..., None], table)  # table[idx[..., i]][..., i, :]
        g_new = fresh - old + np.mean(table, axis=0)
        for s in range(samples):
            table[s] = np.where((idx == s)[..., None], fresh, table[s])
        y = Wd @ y + g_new - g
        g = g_new
        xs.append(x.copy())
    return xs


@twin("gt-saga-atc")
def gt_saga_atc(W, x0, lr, grad_fn, T, sample_grad=None, samples=1, draw=None):
    """GT-SAGA adapt-then-combine (decent-bench 0.3.0's form): ``g = grad f_is(x) - z_is + mean(z)`` (draw ``2k``),
    ``y+ = W (y + g - g_prev)``, ``x+ = W (x - lr y+)``, then ``z_is' = grad f_is'(x+)`` (draw ``2k + 1``); the table
    at ``x0``, ``y0 = g_{-1} = 0``. Arguments as :func:`gt_saga`'s."""
    Wd = _dense(W)
    x = np.array(x0, dtype=np.float64)
    sample_grad, samples, draw = _per_sample(x, grad_fn, sample_grad, samples, draw)
    table = _sample_table(x, sample_grad, samples)
    y, g_prev = np.zeros_like(x), np.zeros_like(x)
    xs = [x.copy()]
    for k in range(T):
        idx = draw(2 * k)
        g = np.asarray(sample_grad(x.copy(), idx)) - np.choose(idx[..., None], table) + np.mean(table, axis=0)
        y = Wd @ (y + g - g_prev)
        x = Wd @ (x - lr * y)
        g_prev = g
        idx2 = draw(2 * k + 1)
        fresh = np.asarray(sample_grad(x.copy(), idx2), dtype=np.float64)
        for s in range(samples):
            table[s] = np.where((idx2 == s)[..., None], fresh, table[s])
        xs.append(x.copy())
    return xs


@twin("push-saga")
def push_saga(C, x0, lr, grad_fn, T, sample_grad=None, samples=1, draw=None):
    """Push-SAGA (Qureshi, Xin, Kar & Khan 2022), adapt then combine: ``x+ = C (x - lr w)``, ``v+ = C v``,
    ``z+ = x+ / v+``; node ``i`` draws ``s = draw(k)[..., i]``, ``g+ = grad f_is(z+) - table[s] + mean(table)``,
    then ``table[s] = grad f_is(z+)``; ``w+ = C (w + g+ - g)``; ``x0 = z0``, ``v0 = 1``, the table at ``z0``,
    ``g0 = w0 = mean(table)``. Returns the models ``z``. Arguments as :func:`gt_saga`'s."""
    C_of = _of(C)
    z = np.array(x0, dtype=np.float64)
    x, v = z.copy(), np.ones((z.shape[-2], 1))
    sample_grad, samples, draw = _per_sample(z, grad_fn, sample_grad, samples, draw)
    table = _sample_table(z, sample_grad, samples)
    g = np.mean(table, axis=0)
    w = g.copy()
    zs = [z.copy()]
    for k in range(T):
        Ck = C_of(k)
        x = Ck @ (x - lr * w)
        v = Ck @ v
        z = x / v
        idx = draw(k)
        fresh = np.asarray(sample_grad(z.copy(), idx), dtype=np.float64)
        g_new = fresh - np.choose(idx[..., None], table) + np.mean(table, axis=0)
        for s in range(samples):
            table[s] = np.where((idx == s)[..., None], fresh, table[s])
        w = Ck @ (w + g_new - g)
        g = g_new
        zs.append(z.copy())
    return zs


@twin("gt-svrg")
def gt_svrg(W, x0, lr, grad_fn, T, sample_grad=None, samples=1, draw=None, snapshot_every=0):
    """GT-SVRG (Xin, Khan & Kar 2020): ``x+ = W x - lr y``; every ``snapshot_every`` iterations (default
    ``samples``) ``tau = x+`` and ``full = mean_l grad f_il(tau)``; ``v+ = grad f_is(x+) - grad f_is(tau) + full``
    (``s = draw(k)``), ``y+ = W y + v+ - v``; ``tau = x0``, ``v0 = y0 = full(x0)``. Arguments as :func:`gt_saga`'s."""
    Wd = _dense(W)
    x = np.array(x0, dtype=np.float64)
    sample_grad, samples, draw = _per_sample(x, grad_fn, sample_grad, samples, draw)
    period = snapshot_every or samples

    def full_at(p):
        return np.mean([np.asarray(sample_grad(p.copy(), np.full(p.shape[:-1], s)), dtype=np.float64)
                        for s in range(samples)], axis=0)

    tau, full = x.copy(), full_at(x)
    v, y = full.copy(), full.copy()
    xs = [x.copy()]
    for k in range(T):
        x = Wd @ x - lr * y
        if (k + 1) % period == 0:
            tau, full = x.copy(), full_at(x)
        idx = draw(k)
        v_new = np.asarray(sample_grad(x.copy(), idx)) - np.asarray(sample_grad(tau.copy(), idx)) + full
        y = Wd @ y + v_new - v
        v = v_new
        xs.append(x.copy())
    return xs


@twin("gt-sarah")
def gt_sarah(W, x0, lr, grad_fn, T, sample_grad=None, samples=1, draw=None, inner_steps=0):
    """GT-SARAH (Xin, Khan & Kar 2022, Algorithm 1): at iterations ``k`` with ``k % (q + 1) == 0``
    ``v+ = mean_l grad f_il(x)``, else ``v+ = grad f_is(x) - grad f_is(x_prev) + v`` (``s = draw``: the k-th draw
    among the recursive steps); ``y+ = W y + v+ - v``, ``x+ = W x - lr y+``; ``y0 = v0 = 0``, ``q`` default
    ``samples``. Arguments as :func:`gt_saga`'s."""
    Wd = _dense(W)
    x = np.array(x0, dtype=np.float64)
    sample_grad, samples, draw = _per_sample(x, grad_fn, sample_grad, samples, draw)
    cycle = (inner_steps or samples) + 1
    v, y, x_prev = np.zeros_like(x), np.zeros_like(x), x.copy()
    xs, draws = [x.copy()], 0
    for k in range(T):
        if k % cycle == 0:
            v_new = np.mean([np.asarray(sample_grad(x.copy(), np.full(x.shape[:-1], s)), dtype=np.float64)
                             for s in range(samples)], axis=0)
        else:
            idx = draw(draws)
            draws += 1
            v_new = np.asarray(sample_grad(x.copy(), idx)) - np.asarray(sample_grad(x_prev.copy(), idx)) + v
        y = Wd @ y + v_new - v
        v = v_new
        x, x_prev = Wd @ x - lr * y, x
        xs.append(x.copy())
    return xs


def awake_mask(n, t, seed, model="bernoulli", q=None, p_sleep=None, p_wake=None, rate=None, period=None):
    """The nodes awake at iteration ``t`` under ``network.Sleepy``'s activation models, from their definitions:
    Bernoulli ``u < q``, Poisson clocks ``u < 1 - exp(-rate)`` (``u = uniform_hash(seed, 2^60 + t, node)``), cyclic
    ``(node - t) % period == 0``, and the Markov chains stepped one iteration at a time from ``s = 0`` (the
    stationary draw ``uniform_hash(seed, 2^62 + 1, node) < p_wake / (p_sleep + p_wake)``, then at each ``s >= 1`` an
    awake node stays awake when ``u_s >= p_sleep`` and a sleeping one wakes when ``u_s < p_wake``)."""
    from ._hashing import uniform_hash

    nodes = np.arange(n)
    if model == "cyclic":
        return np.array([(i - t) % period == 0 for i in range(n)])
    if model in ("bernoulli", "poisson"):  # (q or rate one number, or one per node: node i's own)
        p = np.broadcast_to(np.asarray(q if model == "bernoulli" else 1.0 - np.exp(-np.asarray(rate)), float), (n,))
        return np.array([float(uniform_hash(seed, 2**60 + t, i)) < p[i] for i in range(n)])
    state = [float(uniform_hash(seed, 2**62 + 1, i)) < p_wake / (p_sleep + p_wake) for i in nodes]
    for s in range(1, t + 1):
        for i in nodes:
            u = float(uniform_hash(seed, 2**60 + s, i))
            state[i] = (u >= p_sleep) if state[i] else (u < p_wake)
    return np.array(state)


# ----------------------------------------------------------------- federated methods (a server and clients)
def _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed, local, server, state,
               select=None):
    """A server and ``n`` clients, round by round: ``s_0`` the mean of the rows of ``x0``; each round the chosen
    clients ``S`` (``Federated.chosen``, by the rule of ``select``: ``{"selection": ..., "client_weights": ...}``)
    start from ``s`` and take ``tau_i`` (default ``K``) local steps
    ``y_i <- y_i - lr local(g, y, s, state)`` (the others keep ``s``), then ``s, state = server(s, y, S, tau,
    state)`` and every client holds ``s``. The models after every local step (a round's last: ``s``)."""
    from .algorithms._federated import Federated

    x0 = np.asarray(x0, dtype=np.float64)
    s = x0.mean(axis=0)
    tau = np.full(n, local_steps) if client_steps is None else np.asarray(client_steps)
    m = Federated.clients_for(n, participation)
    y = np.broadcast_to(s, x0.shape).copy()
    xs = [y.copy()]
    r = 0
    while len(xs) <= T:
        S = Federated.chosen(n, m, seed, r, **(select or {}))
        for k in range(local_steps):
            step = lr * local(_grad(grad_fn, y), y, s, state)
            y = np.where((S & (k < tau))[:, None], y - step, y)
            xs.append(y.copy())
        s, state = server(s, y, S, tau, state)
        y = np.broadcast_to(s, x0.shape).copy()
        xs[-1] = y.copy()
        r += 1
    return xs[:T + 1]


@twin("fedavg")
def fedavg(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
           client_weights=None, server_lr=1.0, seed=0):
    """FedAvg (McMahan et al. 2017): local steps ``y <- y - lr g(y)``; ``s <- s + server_lr mean_S (y_i - s)``."""
    return _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                      lambda g, y, s, st: g, lambda s, y, S, tau, st: (s + server_lr * (y[S] - s).mean(axis=0), st), {},
                      select={"selection": selection, "client_weights": client_weights})


@twin("fedprox")
def fedprox(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
            client_weights=None, mu=0.01, seed=0):
    """FedProx (Li et al. 2020): local steps ``y <- y - lr (g(y) + mu (y - s))``; ``s <- mean_S y_i``."""
    return _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                      lambda g, y, s, st: g + mu * (y - s), lambda s, y, S, tau, st: (y[S].mean(axis=0), st), {},
                      select={"selection": selection, "client_weights": client_weights})


@twin("scaffold")
def scaffold(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
             client_weights=None, server_lr=1.0, seed=0):
    """SCAFFOLD (Karimireddy et al. 2020, option II): local steps ``y <- y - lr (g(y) - c_i + c)``; for ``i`` in
    ``S``: ``c_i+ = c_i - c + (s - y_i) / (tau_i lr)``; ``s <- s + server_lr mean_S (y_i - s)``,
    ``c <- c + (1/n) sum_S (c_i+ - c_i)``; ``c_i = c = 0`` at the start."""
    def server(s, y, S, tau, st):
        c, cs = st["c"], st["cs"]
        new = c[S] - cs + (s - y[S]) / (tau[S][:, None] * lr)
        st = {"c": c.copy(), "cs": cs + (new - c[S]).sum(axis=0) / n}
        st["c"][S] = new
        return s + server_lr * (y[S] - s).mean(axis=0), st

    d = np.shape(x0)[-1]
    return _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                      lambda g, y, s, st: g - st["c"] + st["cs"], server, {"c": np.zeros((n, d)), "cs": np.zeros(d)},
                      select={"selection": selection, "client_weights": client_weights})


@twin("feddyn")
def feddyn(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
           client_weights=None, alpha=0.1, seed=0):
    """FedDyn (Acar et al. 2021): local steps ``y <- y - lr (g(y) - lambda_i + alpha (y - s))``; for ``i`` in ``S``:
    ``lambda_i <- lambda_i - alpha (y_i - s)``; ``h <- h - (alpha / n) sum_S (y_i - s)``,
    ``s <- mean_S y_i - h / alpha``; ``lambda_i = h = 0`` at the start."""
    def server(s, y, S, tau, st):
        lam = st["lam"].copy()
        lam[S] -= alpha * (y[S] - s)
        h = st["h"] - alpha / n * (y[S] - s).sum(axis=0)
        return y[S].mean(axis=0) - h / alpha, {"lam": lam, "h": h}

    d = np.shape(x0)[-1]
    return _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                      lambda g, y, s, st: g - st["lam"] + alpha * (y - s), server,
                      {"lam": np.zeros((n, d)), "h": np.zeros(d)},
                      select={"selection": selection, "client_weights": client_weights})


@twin("fednova")
def fednova(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
            client_weights=None, seed=0):
    """FedNova (Wang et al. 2020), plain: local steps ``y <- y - lr g(y)``, ``tau_i`` of them;
    ``s <- s + tau_eff mean_S (y_i - s) / tau_i``, ``tau_eff = mean_S tau_i``."""
    def server(s, y, S, tau, st):
        return s + tau[S].mean() * ((y[S] - s) / tau[S][:, None]).mean(axis=0), st

    return _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                      lambda g, y, s, st: g, server, {},
                      select={"selection": selection, "client_weights": client_weights})


@twin("fedopt")
def fedopt(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
           client_weights=None, server_optimizer="adam", server_lr=0.01, beta1=0.9, beta2=0.99, tau=1e-3, seed=0):
    """FedOpt (Reddi et al. 2021): FedAvg's clients; ``D = mean_S (y_i - s)``, ``m <- beta1 m + (1 - beta1) D``,
    ``v <- v + D^2`` (adagrad), ``beta2 v + (1 - beta2) D^2`` (adam), ``v - (1 - beta2) D^2 sign(v - D^2)``
    (yogi); ``s <- s + server_lr m / (sqrt(v) + tau)``; ``m = v = 0`` at the start."""
    def server(s, y, S, steps, st):
        D = (y[S] - s).mean(axis=0)
        m = beta1 * st["m"] + (1 - beta1) * D
        v = {"adagrad": lambda v: v + D * D, "adam": lambda v: beta2 * v + (1 - beta2) * D * D,
             "yogi": lambda v: v - (1 - beta2) * D * D * np.sign(v - D * D)}[server_optimizer](st["v"])
        return s + server_lr * m / (np.sqrt(v) + tau), {"m": m, "v": v}

    d = np.shape(x0)[-1]
    return _federated(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                      lambda g, y, s, st: g, server, {"m": np.zeros(d), "v": np.zeros(d)},
                      select={"selection": selection, "client_weights": client_weights})


def _federated_own(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed, select, local, server,
                   state):
    """A server and ``n`` clients that keep their own models (FedPD, FedLT): client ``i`` starts at row ``i`` of
    ``x0``, the server at their mean ``s``, ``state = state(x, s)``; each round the chosen clients ``S`` take
    ``tau_i`` local steps ``y_i <- y_i - lr local(g, y, s, state)`` from their own models (the others keep theirs),
    then ``s, state = server(s, y, S, state)``; nobody's model is replaced. The models after every local step."""
    from .algorithms._federated import Federated

    y = np.array(x0, dtype=np.float64)
    s = y.mean(axis=0)
    state = state(y, s)
    tau = np.full(n, local_steps) if client_steps is None else np.asarray(client_steps)
    m = Federated.clients_for(n, participation)
    xs = [y.copy()]
    r = 0
    while len(xs) <= T:
        S = Federated.chosen(n, m, seed, r, **select)
        for k in range(local_steps):
            step = lr * local(_grad(grad_fn, y), y, s, state)
            y = np.where((S & (k < tau))[:, None], y - step, y)
            xs.append(y.copy())
        s, state = server(s, y, S, state)
        r += 1
    return xs[:T + 1]


@twin("fedpd")
def fedpd(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
          client_weights=None, eta=1.0, skip_probability=0.0, seed=0):
    """FedPD (Zhang et al. 2021): local steps ``y <- y - lr (g(y) + lambda_i + (y - c_i) / eta)`` from the
    client's own model; for ``i`` in ``S``: ``lambda_i <- lambda_i + (y_i - c_i) / eta``, then, where round ``r``
    communicates (``FedPD.communicates(seed, skip_probability, r)``), ``s = mean_S (y_i + eta lambda_i)`` and
    ``c_i <- s``, else ``c_i <- y_i + eta lambda_i`` and ``s`` as it was; ``lambda_i = 0``, ``c_i = s_0`` at the
    start."""
    from .algorithms.fedpd import FedPD

    rounds = [0]

    def server(s, y, S, st):
        r, rounds[0] = rounds[0], rounds[0] + 1
        lam, c = st["lam"].copy(), st["c"].copy()
        lam[S] += (y[S] - c[S]) / eta
        candidates = y[S] + eta * lam[S]
        if FedPD.communicates(seed, skip_probability, r):
            s = candidates.mean(axis=0)
            c[S] = s
        else:
            c[S] = candidates
        return s, {"lam": lam, "c": c}

    return _federated_own(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                          {"selection": selection, "client_weights": client_weights},
                          lambda g, y, s, st: g + st["lam"] + (y - st["c"]) / eta, server,
                          lambda y, s: {"lam": np.zeros_like(y), "c": np.tile(s, (n, 1))})


@twin("fedlt")
def fedlt(n, x0, lr, grad_fn, T, local_steps=4, participation=1.0, client_steps=None, selection="uniform",
          client_weights=None, rho=1.0, seed=0):
    """Fed-LT (Bastianello et al. 2024, gradient descent locally, no regulariser): with ``y = mean_i z_i``, local
    steps ``w <- w - lr (g(w) + (w - (2 y - z_i)) / rho)`` from the client's own model; for ``i`` in ``S``:
    ``z_i <- z_i + 2 (w_i - y)``; then ``y <- mean_i z_i`` over every client; ``z_i`` = row ``i`` of ``x0`` at
    the start."""
    def server(s, y, S, st):
        z = st["z"].copy()
        z[S] += 2.0 * (y[S] - s)
        return z.mean(axis=0), {"z": z}

    return _federated_own(n, x0, lr, grad_fn, T, local_steps, participation, client_steps, seed,
                          {"selection": selection, "client_weights": client_weights},
                          lambda g, y, s, st: g + (y - (2.0 * s - st["z"])) / rho, server,
                          lambda y, s: {"z": y.copy()})


# ----------------------------------------------------------------- message compression and noise
def _sequential_sum(values):
    """``values`` added left to right from 0.0, as the kernels do (Python's ``sum`` of floats is compensated
    since 3.12: another value than the kernels' in the last place)."""
    total = 0.0
    for v in values:
        total += v
    return total


def compress_message(v, method, node, first_col, seed, t, r, bits=None, k=None, unbiased=True, sigma=0.0):
    """What ``rowstoch_fast.network.Compressed`` / ``Noisy`` send for one message ``v`` (``L`` values at columns
    ``first_col ..`` of node ``node``'s row in round ``r`` of iteration ``t``), value by value in Python, with
    the draws ``u_c = uniform_hash(seed, t, r, node, tag, column)``:

    - qsgd: ``s = 2^bits - 1``; ``q_c = sign(v_c) l_c (||v||_2 / s)``, ``l_c = min(floor(|v_c| (s / ||v||_2) + u_c), s)``
      (``u_c`` of tag 1 when unbiased, else 1/2); 0 where ``||v|| = 0``;
    - sign: ``sign(v_c) ||v||_1 / L`` (a sum that overflows taken as ``||v / 2^(e-1)||_1``, ``max|v| = f 2^e``,
      scaled back: at most ``max|v|``);
    - topk: the ``k`` largest ``|v_c|`` kept (ties: the lower column), the rest 0;
    - randk: the ``k`` columns of smallest ``u_c`` (tag 2) kept, times ``L / k`` when unbiased;
    - round: ``v_c`` rounded to ``bits`` significant bits, ties to even (an infinite or NaN value as it is);
    - noise: ``v_c + sigma sqrt(-2 ln(1 - u_c)) cos(2 pi u'_c)`` (tags 3 and 4).

    Norms are summed in double precision in column order, and each value computed in double, then stored in
    ``v``'s precision. A finite message is never sent as infinite: where its exact encoding lies past the largest
    finite value ``F`` of ``v``'s precision (qsgd's ``l_c ||v|| / s`` reaches ``sqrt(L) max|v|``, rand-k's ``v_c
    L / k``, round's rounding of a value in the top binade), the value saturates at the largest one the encoding
    sends: ``+-F`` (qsgd, rand-k), ``+-(2^bits - 1) 2^(e - bits)`` (round, ``2^e`` the top binade's end). A message
    that is not finite gives its values as computed.
    """
    import math

    from ._hashing import uniform_hash

    v = np.asarray(v)
    L = len(v)
    u = [lambda c, tag: float(uniform_hash(seed, t, r, node, tag, first_col + c))][0]
    out = np.zeros_like(v)
    top = float(np.finfo(v.dtype).max)

    def saturated(q, finite):  # (a NaN stays NaN)
        return q if not finite else top if q > top else -top if q < -top else q

    if method == "qsgd":
        sq = _sequential_sum(float(x) * float(x) for x in v)
        norm, scale = math.sqrt(sq), 1.0
        m = max((abs(float(x)) for x in v), default=0.0)
        if not 1e-280 <= sq <= 1.7976931348623157e308 and 0 < m <= 1.7976931348623157e308:
            scale = math.ldexp(1.0, math.frexp(m)[1] - 1)  # (squares out of range: v / 2^(e - 1), exactly)
            norm = math.sqrt(_sequential_sum((float(x) / scale) * (float(x) / scale) for x in v))
        s = 2.0**bits - 1
        for c in range(L):
            if norm == 0:
                continue
            level = min(math.floor(abs(float(v[c]) / scale) * (s / norm) + (u(c, 1) if unbiased else 0.5)), s)
            q = level * (norm / s)
            out[c] = saturated(math.copysign(q, float(v[c])) * scale, math.isfinite(norm))
    elif method == "sign":
        l1 = _sequential_sum(abs(float(x)) for x in v)
        scale = l1 / L
        m = max((abs(float(x)) for x in v), default=0.0)
        if l1 == math.inf and m <= 1.7976931348623157e308:  # (the sum overflowed: |v| / 2^(e - 1), exactly)
            p = math.ldexp(1.0, math.frexp(m)[1] - 1)
            scale = min(_sequential_sum(abs(float(x)) / p for x in v) / L * p, m)
        out[:] = [scale if x > 0 else -scale if x < 0 else 0.0 for x in v]
    elif method in ("topk", "randk"):
        kk = min(k, L)
        key = [-abs(float(x)) for x in v] if method == "topk" else [u(c, 2) for c in range(L)]
        keep = sorted(range(L), key=lambda c: (key[c], c))[:kk]
        scale = L / kk if method == "randk" and unbiased else 1.0
        for c in keep:
            with np.errstate(over="ignore"):  # (in v's precision, as the kernels; past F: saturated)
                out[c] = v[c] if scale == 1.0 else saturated(float(v[c] * v.dtype.type(scale)), np.isfinite(v[c]))
    elif method == "round":
        for c in range(L):
            m, e = math.frexp(float(v[c]))
            if not math.isfinite(float(v[c])):
                out[c] = v[c]
                continue
            try:
                q = math.ldexp(round(math.ldexp(m, bits)), e - bits)  # (round(): ties to even)
            except OverflowError:  # (rounded up to 2^1024)
                q = math.inf
            if abs(q) > top:  # (past F: the largest value of `bits` bits)
                q = math.ldexp(2**bits - 1, e - bits)
            out[c] = math.copysign(q, float(v[c]))  # (-0.0 stays -0.0)
    elif method == "noise":
        for c in range(L):
            z = math.sqrt(-2.0 * math.log(1.0 - u(c, 3))) * math.cos(6.283185307179586 * u(c, 4))
            out[c] = float(v[c]) + sigma * z
    else:
        raise ValueError(method)
    return out


def compress(X, method, d, seed, t, r, **params):
    """Every row of ``X`` (node ``i`` at row ``i``) cut into messages of ``d`` values (the whole row where ``d``
    does not divide it) and each sent through :func:`compress_message`; a parameter given as an array (``bits``,
    ``k``, ``sigma`` per node) is node ``i``'s entry for its messages."""
    X = np.asarray(X)
    w = X.shape[1]
    L = d if w % d == 0 else w
    out = np.empty_like(X)
    for i in range(X.shape[0]):
        mine = {key: (value[i].item() if np.ndim(value) else value) for key, value in params.items()}
        for c0 in range(0, w, L):
            out[i, c0:c0 + L] = compress_message(X[i, c0:c0 + L], method, i, c0, seed, t, r, **mine)
    return out


def compressed_round(M, X, Q):
    """One round of a network whose senders send ``Q`` instead of ``X`` (``M``: the round's dense matrix, losses
    and sleep included): ``y_i = m_ii x_i + sum_{j != i} m_ij q_j``."""
    M = np.asarray(M, dtype=np.float64)
    D = np.diag(np.diag(M))
    return (M - D) @ np.asarray(Q, dtype=np.float64) + D @ np.asarray(X, dtype=np.float64)


def delay_ages(indptr, indices, seed, t, r, max_delay, fixed=False):
    """For every stored entry (the link ``j -> i``), the age of the newest message sent over it that has arrived
    by iteration ``t`` (``rowstoch_fast.network.Delayed``): the message of iteration ``s`` arrives after ``tau(s) =
    floor(u (D + 1))`` iterations, ``u = uniform_hash(seed, 3 2^61 + s, r, i, j)`` (``fixed``: ``tau = D``); the
    age is the smallest ``k <= min(D, t)`` with ``tau(t - k) <= k``, and ``t`` where no message has arrived yet
    (the initial one counts as known). A self loop is 0."""
    from ._hashing import uniform_hash

    ages = []
    for i in range(len(indptr) - 1):
        for q in range(indptr[i], indptr[i + 1]):
            j = int(indices[q])
            last = min(max_delay, t)
            age = last
            if j == i:
                age = 0
            elif not fixed:
                for k in range(last):
                    if float(uniform_hash(seed, 3 * 2**61 + t - k, r, i, j)) < (k + 1) / (max_delay + 1):
                        age = k
                        break
            ages.append(age)
    return np.array(ages, dtype=np.int64)


def delayed_mix(M, own, history, t, ages_of):
    """One round of a network whose receivers use delayed messages: ``y_i = m_ii own_i + sum_{j != i} m_ij
    history[t - age_ij][j]``, ``history[s]`` the (dense) messages sent in iteration ``s``, ``ages_of`` a dense
    ``n x n`` array of the ages (``M``: the round's matrix, losses included)."""
    M = np.asarray(M, dtype=np.float64)
    n = M.shape[0]
    Y = np.zeros(np.shape(own), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            if M[i, j]:
                Y[i] += M[i, j] * (own[i] if i == j else history[t - ages_of[i, j]][j])
    return Y


def link_noise(indptr, indices, seed, t, r, w, ages=None):
    """The noise on each received copy (``rowstoch_fast.network.Noisy(per="link")``): for the stored entry ``q``
    (the link ``j -> i``) and value ``c``, ``sqrt(-2 ln(1 - u)) cos(2 pi u')`` with ``u, u' = uniform_hash(seed, s, r,
    i, j, 3 | 4, c)``, ``s = t - ages[q]`` the iteration the message was sent (``t`` without delays)."""
    import math

    from ._hashing import uniform_hash

    out = []
    for i in range(len(indptr) - 1):
        for q in range(indptr[i], indptr[i + 1]):
            j, s = int(indices[q]), t - (0 if ages is None else int(ages[q]))
            out.append([math.sqrt(-2.0 * math.log(1.0 - float(uniform_hash(seed, s, r, i, j, 3, c))))
                        * math.cos(6.283185307179586 * float(uniform_hash(seed, s, r, i, j, 4, c))) for c in range(w)])
    return np.array(out, dtype=np.float64).reshape(len(out), w)


def noisy_round(M, X, Q, noise_of, sigma):
    """One round whose receivers get their own noisy copy: ``y_i = m_ii x_i + sum_{j != i} m_ij (q_j + sigma
    z_ij)``, ``noise_of(i, j)`` the noise vector of the link ``j -> i`` (``M``: the round's matrix)."""
    M = np.asarray(M, dtype=np.float64)
    Y = compressed_round(M, X, Q)
    for i in range(M.shape[0]):
        for j in range(M.shape[0]):
            if M[i, j] and i != j:
                Y[i] += M[i, j] * sigma * noise_of(i, j)
    return Y


# ----------------------------------------------------------------- the network layers, one dense definition each
#: Each registered network layer's dense definition, by its ``layer`` name: a layer that acts on the matrices
#: gives its round's matrix, one that acts on the links which stored entries of the source's round it drops (and
#: which nodes sleep), one that acts on the messages what it does to them (``tests/test_layers.py`` runs every
#: layer and every composition of :func:`rowstoch_fast.network.examples` against :func:`network_run`, and fails
#: for a layer without one).
LAYER_TWINS = {}


def layer_twin(name):
    """Register the dense definition of the network layer ``name``."""
    return _registrar(LAYER_TWINS)(name)


@layer_twin("schedule")
def schedule_matrix(net, t, r):
    """``A_t = matrices[t % m]``."""
    return net.matrices[t % len(net.matrices)]


@layer_twin("lossy")
def lossy_gone(net, t, r, indptr, indices):
    """The stored entries whose message is lost (:func:`lost_links`; bursty: gated by the links' chains), no node
    asleep."""
    bad = None
    if net.model == "gilbert-elliott":
        rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        bad = gilbert_elliott_states(net.seed, rows, np.asarray(indices, dtype=np.int64), t, net.p_bad, net.p_recover)
    return lost_links(indptr, indices, net.seed, t, r, net.p, bad=bad), None


@layer_twin("sleepy")
def sleepy_gone(net, t, r, indptr, indices):
    """The messages from or to a sleeping node (:func:`awake_mask`) are gone; a sleeping node keeps its value."""
    awake = awake_mask(net.n, t, net.seed, **net._parameters())
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    cols = np.asarray(indices, dtype=np.int64)
    return ~(awake[rows] & awake[cols]) & (rows != cols), ~awake


def _link_layers(net):
    """``(source, link layers outer first)`` under ``net``'s message layers."""
    layers = []
    while getattr(net, "acts_on", None) == "links":
        layers.append(net)
        net = net.base
    return net, layers


def network_matrix(net, t, r=0):
    """The dense matrix of round ``r`` of iteration ``t`` of a network of matrix and link layers, from the layers'
    definitions: the source's round (a static matrix, or :data:`LAYER_TWINS` of its schedule), every link layer's
    lost entries and sleeping nodes put together, then a row-stochastic receiver renormalises over what arrived
    (its own value where nothing did) and a column-stochastic sender's lost mass is lost; a sleeping node's row is
    ``e_i``. Under the undirected rule (``stochastic == "doubly"``) a link is used only where neither of its two
    messages is gone, and an unused link's weight stays on each end's own value."""
    source, layers = _link_layers(net)
    M = source if getattr(source, "acts_on", None) != "matrices" else LAYER_TWINS[source.layer](source, t, r)
    c = M.csr
    gone = np.zeros(c.nnz, dtype=bool)
    asleep = np.zeros(M.n, dtype=bool)
    for layer in layers:
        g, s = LAYER_TWINS[layer.layer](layer, t, r, c.indptr, c.indices)
        gone |= g
        if s is not None:
            asleep |= s
    rows = np.repeat(np.arange(M.n), np.diff(c.indptr))
    if net.stochastic == "doubly":
        G = np.zeros((M.n, M.n), dtype=bool)
        G[rows[gone], c.indices[gone]] = True
        G |= G.T  # (either message of the link)
        np.fill_diagonal(G, False)
        W = np.zeros((M.n, M.n))
        np.add.at(W, (rows, c.indices), c.data.astype(np.float64))
        D = np.where(G, 0.0, W)
        D[np.diag_indices(M.n)] += np.where(G, W, 0.0).sum(axis=1)
        D[asleep] = np.eye(M.n)[asleep]
        return D
    D = np.zeros((M.n, M.n))
    np.add.at(D, (rows[~gone], c.indices[~gone]), c.data[~gone].astype(np.float64))
    if net.stochastic == "row":
        for i in range(M.n):
            lost = gone[c.indptr[i]:c.indptr[i + 1]].any()
            if lost:
                total = D[i].sum()
                D[i] = np.eye(M.n)[i] if total == 0 else D[i] / total
    D[asleep] = np.eye(M.n)[asleep]
    return D


# A layer on the messages gives what it does to them, as a dict: "messages" (what the senders send instead:
# the layers apply theirs outer first), "ages" (per stored entry of the links, how old the copy a receiver uses
# is), "noise" (per stored entry and value, added to the received copy, drawn for the iteration it was sent).
@layer_twin("compressed")
def compressed_messages(net, Q, t, r, d, links, ages):
    """Every message compressed (:func:`compress`)."""
    params = {key: getattr(net, key) for key in net._TAKES[net.method]}
    return {"messages": compress(Q, net.method, d, net.seed, t, r, **params)}


@layer_twin("noisy")
def noisy_messages(net, Q, t, r, d, links, ages):
    """``per="message"``: every message gets noise of its own (:func:`compress` ``"noise"``); ``per="link"``:
    every received copy its own (:func:`link_noise`)."""
    if net.per == "message":
        return {"messages": compress(Q, "noise", d, net.seed, t, r, sigma=net.sigma)}
    if ages is None:  # (network_run's first pass: the messages and their ages; the noise follows the ages)
        return {}
    sigma = net.sigma if np.ndim(net.sigma) == 0 else np.asarray(net.sigma)[np.asarray(links.indices)][:, None]
    return {"noise": sigma * link_noise(links.indptr, links.indices, net.seed, t, r, Q.shape[1], ages=ages)}


@layer_twin("delayed")
def delayed_messages(net, Q, t, r, d, links, ages):
    """The copies a receiver uses are those of :func:`delay_ages`."""
    return {"ages": delay_ages(links.indptr, links.indices, net.seed, t, r, net.max_delay,
                               fixed=net.delay == "fixed")}


def network_run(net, Xs, d=None):
    """``[Y_t]``: one round of iteration ``t`` of ``net`` applied to ``Xs[t]``, ``t = 0, 1, ...`` (a network with
    delays mixes the messages of earlier iterations), from the layers' definitions: the core's round matrix
    (:func:`network_matrix`), the messages the message layers make of the rows (the outer layer first), the age of
    each receiver's copy and the noise on it: ``y_i = m_ii x_i + sum_{j != i} m_ij (q_j(t - a_ij) + z_ij)``."""
    layers, core = [], net
    while getattr(core, "acts_on", None) == "messages":
        layers.append(core)
        core = core.base
    source = _link_layers(core)[0]
    history, out = [], []
    for t, X in enumerate(Xs):
        X = np.asarray(X, dtype=np.float64)
        links = (source if getattr(source, "acts_on", None) != "matrices" else
                 LAYER_TWINS[source.layer](source, t, 0)).csr
        rows = np.repeat(np.arange(len(links.indptr) - 1), np.diff(links.indptr))
        Q, ages, noise = X, np.zeros(links.nnz, dtype=np.int64), np.zeros((links.nnz, X.shape[1]))
        later = []  # (the layers whose effect needs the ages: noise on the received copies)
        for layer in layers:  # (the outer one first, as the senders apply them)
            effect = LAYER_TWINS[layer.layer](layer, Q, t, 0, d or X.shape[1], links, None)
            Q = effect.get("messages", Q)
            ages = effect.get("ages", ages)
            if not effect:
                later.append(layer)
        for layer in later:  # (drawn for the iteration each copy was sent)
            noise = noise + LAYER_TWINS[layer.layer](layer, Q, t, 0, d or X.shape[1], links, ages).get("noise", 0.0)
        history.append(Q)
        M = network_matrix(core, t)
        A = np.zeros(M.shape, dtype=np.int64)
        A[rows, links.indices] = ages
        Y = delayed_mix(M, X, history, t, A)
        for q, (i, j) in enumerate(zip(rows, links.indices)):
            if i != j:
                Y[i] += M[i, j] * noise[q]
        out.append(Y)
    return out
