"""The web page: server-rendered HTML on the daemon's loopback TCP site at `/`.

The daemon hands the app a `WebDeps` (`Services.web`); server/app.py mounts ROUTES
(web/routes.py) with the API's. The pages call the same service functions as the API
handlers (search, sessions, summaries, the memory file, the context builder); nothing here
has its own data path.
"""
