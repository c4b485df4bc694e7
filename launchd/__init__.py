"""The launchd agent plist, shipped as package data for `musec daemon install`."""
