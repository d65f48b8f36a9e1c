"""What an operator's tools read: GET /openapi.json (the REST contract of the apps this
controller loaded), GET /metrics (Prometheus text format) and GET /ui, the live page of
the fabric's links, trees, plans and rounds (syncfabric/operator/live_page.py). The fabric app registers it, so every
controller serves it."""

from ryu.app.wsgi import Response

from apps.rest_json import RestApi, counted_route, json_response
from syncfabric.operator import openapi
from syncfabric.operator.live_page import PAGE, UI_ASSETS, page_file
from syncfabric.operator.metrics import CONTENT_TYPE


def registered_operations(mapper):
    """{(path template, METHOD)} of every route registered with Ryu's wsgi mapper."""
    return {(route.routepath, method) for route in mapper.matchlist
            for method in route.conditions.get("method", [])}


def ui_file(name, content_type):
    return Response(body=page_file(name), content_type=content_type, charset="utf-8")


class OperatorRestApi(RestApi):
    """GET /openapi.json, /metrics, /ui and /ui/<asset>."""

    @counted_route("operator", "/openapi.json", methods=["GET"])
    def get_openapi(self, req, **_kwargs):
        return json_response(openapi.served(registered_operations(self.parent.mapper)))

    @counted_route("operator", "/metrics", methods=["GET"])
    def get_metrics(self, req, **_kwargs):
        return Response(body=self.metrics.exposition(), headerlist=[("Content-Type", CONTENT_TYPE)])

    @counted_route("operator", "/ui", methods=["GET"])
    def get_ui(self, req, **_kwargs):
        return ui_file(*PAGE)

    @counted_route("operator", "/ui/{asset}", methods=["GET"])
    def get_ui_asset(self, req, asset, **_kwargs):
        if asset not in UI_ASSETS:
            return json_response({"error": "no asset %r; the page is at /ui" % asset}, 404)
        return ui_file(asset, UI_ASSETS[asset])
