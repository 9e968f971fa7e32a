"""The Tiles tab's Qt-free model: the lanes, their clock and player, each block's detail, the
online softmax, the chip layouts, the kernels' sources and the replay of recorded traces."""
