"""The small training run the distributed and SLURM training tests share: 32x32
super-resolution patches of a 48x48 image, 4 tiles of 16 with 4 pixels of overlap."""

DATASET = {"image_size": 48, "task": "superres", "noise_level": 0.05}
SOLVER = {"num_stages": 2, "denoiser_width": 8, "denoiser_depth": 3, "patch_size": 32,
          "batch_size": 4, "device": "cpu", "tile_size": 16, "tile_overlap": 4,
          "tiles_per_batch": 2, "num_threads": 1}
