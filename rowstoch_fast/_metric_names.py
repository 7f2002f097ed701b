"""The names of the harness's built-in metrics: what :mod:`rowstoch_fast.runner` records and
:mod:`rowstoch_fast.user_metrics` keeps free of the metrics users define (one list, below both)."""

#: Metrics of every record (the History's columns between ``rep`` and ``wall_seconds``, in this order). The test
#: metrics are those of the mean model on the objective's held-out data (NaN without it:
#: :meth:`~rowstoch_fast.objectives.Objective.test_metrics`).
METRICS = ("grad_norm", "grad_norm_centroid", "loss", "consensus_error", "descent_deviation", "suboptimality",
           "distance", "grad_norm_mean", "test_loss", "test_accuracy", "test_mse")
#: The test metrics of :data:`METRICS`.
TEST_METRICS = ("test_loss", "test_accuracy", "test_mse")
#: The metrics a comparison can tune on and rank by: positive at the start and 0 at the solution (the tuner's and
#: the statuses' rules read them so). ``loss`` ends at f* (not 0), ``consensus_error`` and ``descent_deviation``
#: start at 0 from a common start, the test metrics end at the model's error on unseen data (not 0): they are
#: shown beside the ranked one, never ranked. A metric you define is ranked where it was registered
#: ``ranked=True`` (:func:`~rowstoch_fast.user_metrics.register_metric`).
RANKED_METRICS = ("suboptimality", "grad_norm_mean", "grad_norm", "grad_norm_centroid", "distance")
#: The kinds of oracle call an optimizer counts (:attr:`~rowstoch_fast.algorithms.Optimizer.calls`), and what one
#: call is (at every node and replica); the harness's metric of each is ``<kind>_calls``.
CALL_KINDS = {
    "gradient": "a call of grad_fn (a mini-batch's, or a drawn sample's, gradient at every node; R mini-batches "
                "averaged for a rounds = R method count as one call)",
    "sample_gradient": "the gradient of one given sample of a finite sum at every node (the passes of GT-SAGA's "
                       "table, GT-SVRG's snapshot, GT-SARAH's outer loop)",
    "prox": "the regularizer's proximal operator at every node (the proximal methods)",
    "local_prox": "the proximal operator of each node's own f_i (ADMM)",
}
