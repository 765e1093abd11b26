"""What the tests of the container command lines share: values Apptainer's --env takes and
how it must be given them, and an srun task's environment."""

# Checked against apptainer 1.4.5 in tests/system/test_runtimes.py (a real run).
APPTAINER_ENV = {
    "0,1": "Q=0,1",  # one '=': taken whole, commas and all
    'x"y': 'Q=x"y',
    "a=1,B=2": '"Q=a=1,B=2"',  # more than one '=': one quoted CSV field
    'a=1,B="2"': '"Q=a=1,B=""2"""',
    "a=b": "Q=a=b",
}
SLURM_TASK = {"SB_REPO": "/repo", "SB_TASK_RANKS": "1", "SLURM_PROCID": "3",
              "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2",
              "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "n2", "MASTER_ADDR": "10.0.0.1",
              "MASTER_PORT": "20042", "SLURM_JOB_NODELIST": "n[1,3]"}
