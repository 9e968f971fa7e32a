"""The app's Qt-free state: what the window shows and why, testable and usable without Qt."""
