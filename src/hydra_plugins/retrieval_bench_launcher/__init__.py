"""`hydra/launcher=slurm`'s launcher. Hydra takes launchers only from the `hydra_plugins`
namespace package, hence this package; the checks live in `run.slurm`."""
