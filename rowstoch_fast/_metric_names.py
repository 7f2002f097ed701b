"""The names of the harness's built-in metrics: what :mod:`rowstoch_fast.runner` records and
:mod:`rowstoch_fast.user_metrics` keeps free of the metrics users define (one list, below both)."""

#: Metrics of every record (the History's columns between ``rep`` and ``wall_seconds``, in this order). The test
#: metrics are those of the mean model on the objective's held-out data (NaN without it:
#: :meth:`~rowstoch_fast.objectives.Objective.test_metrics`).
METRICS = ("grad_norm", "grad_norm_centroid", "loss", "consensus_error", "descent_deviation", "suboptimality",
           "distance", "grad_norm_mean", "test_loss", "test_accuracy", "test_mse")
#: The test metrics of :data:`METRICS`.
TEST_METRICS = ("test_loss", "test_accuracy", "test_mse")
