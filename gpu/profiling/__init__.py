"""What the hardware saw: CUPTI traffic counters, and real execution traces (which SM
ran each block and when each phase began), recorded and read back."""
