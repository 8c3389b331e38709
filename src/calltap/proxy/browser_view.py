"""The view addon: the browser view at `/ui/` and its JSON API at `/api/…` on the admin listener,
over the recordings this proxy writes. The view keeps its own index of the tree and notices new
pairs by itself, so it needs no event from the relay: mounting it is all there is."""

from __future__ import annotations

from calltap.config import Config
from calltap.proxy.admin import Admin
from calltap.proxy.hooks import Addon
from calltap.view.server import mount


class BrowserView(Addon):
    """With `allow_remote`, every request to the view needs the `CALLTAP_VIEW_TOKEN` token."""

    def __init__(self, admin: Admin, config: Config) -> None:
        mount(admin.app, config.recordings, allow_remote=config.allow_remote,
              bucket=config.bucket)
