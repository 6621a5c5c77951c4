"""Generated from proto/ by scripts/proto-python.sh. Do not edit."""
