"""scaffold as a GitHub Action (``action.yml``): DiagramCheck on a pull request, and one
agent slot on a runner, run by ``scaffold action <mode>``."""
