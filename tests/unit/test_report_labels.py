"""The report's run labels leave out SLURM resources and name a changed network."""

from __future__ import annotations

import pandas as pd


def test_labels_leave_out_slurm_resources_and_name_a_changed_network():
    """A strong-scaling campaign (slurm_ntasks_per_node 1, 2) is one configuration on two
    world sizes; 'pretrained: auto' that ran another network is another configuration."""
    from scalebench.results.report.data import configuration_columns, run_labels

    rows = pd.DataFrame({
        "run": ["a", "b", "c"], "solver_name": ["pnp[x]"] * 3,
        "dataset_name": ["tomography_2d[y]"] * 3, "idx_rep": [0, 0, 0],
        "p_solver_slurm_ntasks_per_node": [1, 2, 2], "prov_world_size": [1, 2, 2],
        "p_solver_pretrained": ["auto"] * 3,
        "prov_denoiser_architecture": ["dncnn-small", "dncnn-small", "dncnn-full"]})
    labels = run_labels(rows, ("prov_world_size",))
    assert labels == {"a": "pnp on tomography_2d network=dncnn-small",
                      "b": "pnp on tomography_2d network=dncnn-small",
                      "c": "pnp on tomography_2d network=dncnn-full"}
    assert configuration_columns(rows) == ["p_solver_pretrained", "prov_denoiser_architecture"]
