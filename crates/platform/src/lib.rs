//! Discovery and calibration of processing units.
