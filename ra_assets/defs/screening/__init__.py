"""Screening: the per-project `screening_ranking` asset and the sensor that follows new projects and decisions."""
