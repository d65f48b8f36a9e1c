"""The deployment guide and the script that follows it say the same: every command of
docs/deploy.md's code blocks is one experiments.deploy_check runs or names as not run,
and the daemon's systemd unit runs the guide's daemon command line."""

from experiments import deploy_guide as guide


def test_the_guides_commands_are_the_checks_commands():
    in_guide = guide.guide_commands(guide.GUIDE.read_text())
    assert len(in_guide) == len(set(in_guide)), "a command is in the guide twice"
    assert set(in_guide) == set(guide.RUN) | set(guide.NOT_RUN)
    assert not set(guide.RUN) & set(guide.NOT_RUN)


def test_the_units_command_line_is_the_guides_daemon():
    assert guide.unit_command_line(guide.UNIT.read_text()) == guide.DAEMON
    environment, _command = guide.unit_service(guide.UNIT.read_text())
    assert ("file:", "/etc/syncfabric/env") in environment   # where DAEMON_TOKEN writes


def test_code_blocks_become_one_command_a_line_without_comments_or_json():
    text = "\n".join([
        "Run this:", "", "    first --flag \\", "        --more", "    # a comment",
        "    second", "", "An example:", "", '    {"switches": [],', '     "links": []}', "",
        "Then:", "", "    third", "end"])
    assert guide.guide_commands(text) == ["first --flag --more", "second", "third"]


def test_words_are_filled_whole_and_paths_replaced():
    filled = guide.filled("ovs-vsctl add-port BRIDGE PORT -- set interface PORT "
                          "ofport_request=NUMBER /etc/syncfabric/x",
                          {"BRIDGE": "leaf1", "PORT": "leaf1-eth3", "NUMBER": 3},
                          {"/etc/syncfabric": "/tmp/etc"})
    assert filled == ("ovs-vsctl add-port leaf1 leaf1-eth3 -- set interface leaf1-eth3 "
                      "ofport_request=3 /tmp/etc/x")
    assert guide.filled("BRIDGES BRIDGE", {"BRIDGE": "b"}, {}) == "BRIDGES b"
