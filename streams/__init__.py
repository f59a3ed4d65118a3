"""Stream processors (faust-streaming): turns → facts (extractor), facts → memory decisions."""
