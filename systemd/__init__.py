"""The systemd user units, shipped as package data for `musec daemon install`."""
