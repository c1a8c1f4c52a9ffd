# One llama-server for the whole session (the real test peer), shared by every test module that asks for it.
pytest_plugins = ["tests.support.llama_fixture", "tests.support.vllm_fixture", "tests.support.browser_fixture"]
