"""The apps' timers (apps/services.start_timers) stop with their app: a timer's last tick
after its app stopped sends nothing, since the event goes by name and a newer app of the
same name (the next test's, or a restarted controller's) would take it."""

from types import SimpleNamespace

from ryu.lib import hub

from apps.services import start_timers


class Tick:
    pass


def test_a_stopped_apps_timer_sends_nothing_more():
    sent = []
    app = SimpleNamespace(name="JobController", is_active=True,
                          send_event=lambda name, event: sent.append(type(event)))
    start_timers(app, {Tick: 0.05})
    hub.sleep(0.12)
    ticked = list(sent)
    assert ticked and set(ticked) == {Tick}
    app.is_active = False
    hub.sleep(0.12)
    assert sent == ticked
