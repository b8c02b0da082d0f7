"""Published results (other people's measurements) as data with their sources: the tables are in
``reference/published.py``, the tokens other tools produce in ``reference/expected_tokens.py``;
each is imported from its module."""
