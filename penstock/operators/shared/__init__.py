"""What the operator families share; a family imports these and the layers below, never another family."""
