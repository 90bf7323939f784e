"""The live monitor's pure state: the Session, its snapshot views, the dial, replay."""
