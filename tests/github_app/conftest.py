from ghsim.fixture import github_sim  # noqa: F401
