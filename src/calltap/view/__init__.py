"""The browser view of a recordings tree and the static report, rendered from one set of templates.

`templating` holds the Jinja2 environment (autoescape on: every captured string is hostile),
`index` the SQLite index of pair summaries that keeps the list fast on big trees, `pages` the
sans-IO model of one pair's page, `server` the aiohttp application (`calltap view`, and `/ui/`
under `calltap serve`), and `static_report` what `calltap report` writes.
"""
