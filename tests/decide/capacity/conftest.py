"""rpp/decide/capacity/: size, creates, caps, placement, prices, autoscale."""
