"""Tests that need no root, no Open vSwitch and no Mininet: decisions, services through\nfake switches, the apps in-process, and the scripts' arguments."""
