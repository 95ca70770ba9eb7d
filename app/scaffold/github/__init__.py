"""The GitHub App: auth, the REST client, the flows it runs, the forge and the checks it posts."""
