"""Code the tests share (imported as `support.<module>`; tests/ is on sys.path through
tests/conftest.py): the fakes (`fakes`), the random cases of the parity tests (`random_cases`),
small datasets written on the fly (`datasets`, `synth_dataset`), random-weight models
(`random_models`), the HTTP service stand-in (`service_server`), the browser driver
(`chromium`), the SLURM cluster fixture (`slurm`) and the benchmark-script runner
(`benchmarks`). Fixtures and the job runners live in tests/conftest.py."""
